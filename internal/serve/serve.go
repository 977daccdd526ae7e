// Package serve runs a service's gRPC and HTTP servers and stops them the
// way every Switchyard service ends (DESIGN §7): let in-flight calls finish
// within a hard deadline, then force what is left.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// init gives every gRPC server, client and the proto codec in a Switchyard
// process a buffer pool with a tier at every power of two from 256 B to
// 16 MiB. gRPC's default pool jumps from 32 KiB to 1 MiB and zeroes a
// buffer's whole capacity on every Get, so each Route carrying a 40 KB
// chat body (an 8k-token prompt) cost a 1 MiB clear on each side of the
// call, a tenth of the router's CPU; here a message is cleared in a buffer
// less than twice its size. Every service imports this package, and the
// pool can only be set at init: the codec has no per-server option.
func init() {
	exps := make([]uint8, 0, 17)
	for e := uint8(8); e <= 24; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic(fmt.Sprintf("serve: grpc buffer pool: %v", err)) // static tiers: cannot fail
	}
	experimental.SetDefaultBufferPool(p)
}

// GRPC serves srv on ln until it is stopped; stopping is not an error.
func GRPC(srv *grpc.Server, ln net.Listener) error {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve grpc: %w", err)
	}
	return nil
}

// HTTP serves srv on ln until it is shut down; shutting down is not an
// error.
func HTTP(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

// StopGRPC stops srv gracefully, and forcibly once deadline passes.
func StopGRPC(srv *grpc.Server, deadline time.Time, log zerolog.Logger) {
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

// StopHTTP shuts srv down, closing the connections still open at deadline.
func StopHTTP(srv *http.Server, deadline time.Time, log zerolog.Logger) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn().Err(err).Msg("http shutdown")
		_ = srv.Close()
	}
}
