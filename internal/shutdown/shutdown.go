// Package shutdown stops servers gracefully within a hard deadline, the way
// every Switchyard service ends (DESIGN §7): let in-flight calls finish,
// then force what is left.
package shutdown

import (
	"context"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
)

// GRPC stops srv gracefully, and forcibly once deadline passes.
func GRPC(srv *grpc.Server, deadline time.Time, log zerolog.Logger) {
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		log.Warn().Msg("grpc graceful stop timed out, forcing")
		srv.Stop()
		<-stopped
	}
}

// HTTP shuts srv down, closing the connections still open at deadline.
func HTTP(srv *http.Server, deadline time.Time, log zerolog.Logger) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("http shutdown")
		_ = srv.Close()
	}
}
