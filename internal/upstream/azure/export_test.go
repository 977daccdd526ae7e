package azure

import (
	"time"

	"github.com/switchyard-dev/switchyard/internal/upstream"
)

// SetClock replaces the token cache's clock of an adapter New made.
func SetClock(a upstream.Adapter, now func() time.Time) { a.(*Adapter).now = now }
