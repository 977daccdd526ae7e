//go:build !nokube

package main

import (
	"github.com/switchyard-dev/switchyard/services/policyd"
	"github.com/switchyard-dev/switchyard/services/policyd/kube"
)

// policyd's Kubernetes source is linked by the binary alone (see
// services/policyd/kube); `go build -tags nokube` leaves it, and client-go,
// out: policyd then reads files only.
func init() { policyd.RegisterSource(policyd.SourceKubernetes, kube.New) }
