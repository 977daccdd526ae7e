package router

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/switchyard-dev/switchyard/internal/configcheck"
	"github.com/switchyard-dev/switchyard/internal/lifecycle"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
)

// The operator role.
//
// Explain answers, for any prompt its caller sends, how many of its tokens
// each worker caches: whoever can call it can learn whether anyone sent a
// given prompt prefix lately (a cache-membership oracle). ListEndpoints
// shows the fleet's workers, addresses and load. Both are for operators
// (and the gateway, which lists endpoints for /v1/models and worker
// health), never for clients; Route, the gateway's call, is not guarded.
//
// A caller has the operator role when it presents the bearer token of
// --operator-token-file ("authorization: Bearer TOKEN", gRPC metadata or
// HTTP header; compared in constant time), or, over mutual TLS on the gRPC
// port, a client certificate whose common name or a DNS or URI name is in
// --operator-identities. Without either flag the router cannot tell an
// operator, and decides by where it listens: Explain is served only on a
// loopback listen address (gRPC and REST each by their own address), where
// only processes on the host reach it; ListEndpoints stays open, as it
// reveals no request's data. A router listening beyond loopback without
// them logs a warning at start.
//
// What Explain returns is the decision for the request its caller sent,
// and the state of every worker (health, load counts, KV cache usage, the
// cached tokens of the caller's own prompt): never another request's id,
// tenant, prompt or tokens. ListEndpoints returns worker state only.

// operatorMethods are the full gRPC method names that need the role.
var operatorMethods = map[string]bool{
	routerv1.Router_Explain_FullMethodName:       true,
	routerv1.Router_ListEndpoints_FullMethodName: true,
}

type operatorAuth struct {
	// token is the SHA-256 of the token; nil without --operator-token-file.
	// Comparing digests keeps the comparison constant-time whatever the
	// length presented.
	token      *[sha256.Size]byte
	identities map[string]bool
	// explainGRPC and explainREST say whether Explain is served without
	// the role (nothing configured, loopback listener).
	explainGRPC, explainREST bool
}

func newOperatorAuth(cfg *Config) (*operatorAuth, error) {
	a := &operatorAuth{identities: map[string]bool{}}
	if cfg.OperatorTokenFile != "" {
		tok, err := lifecycle.ReadToken(cfg.OperatorTokenFile)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(tok))
		a.token = &sum
	}
	for id := range strings.SplitSeq(cfg.OperatorIdentities, ",") {
		if id = strings.TrimSpace(id); id != "" {
			a.identities[id] = true
		}
	}
	if !a.configured() {
		a.explainGRPC, a.explainREST = configcheck.Loopback(cfg.GRPCAddr), configcheck.Loopback(cfg.HTTPAddr)
	}
	return a, nil
}

func (a *operatorAuth) configured() bool { return a.token != nil || len(a.identities) > 0 }

// exposed reports whether Explain is refused for lack of any way to tell
// an operator on a surface that listens beyond loopback: worth a warning.
func (a *operatorAuth) exposed() bool {
	return !a.configured() && (!a.explainGRPC || !a.explainREST)
}

// open reports whether method is served without the role; rest says on
// which surface.
func (a *operatorAuth) open(explain, rest bool) bool {
	switch {
	case a.configured():
		return false
	case !explain:
		return true // ListEndpoints: see the comment above
	case rest:
		return a.explainREST
	default:
		return a.explainGRPC
	}
}

// bearerOK reports whether an authorization value carries the token.
func (a *operatorAuth) bearerOK(auth string) bool {
	if a.token == nil {
		return false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(auth), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], a.token[:]) == 1
}

// identityOK reports whether ctx's peer presented a verified client
// certificate naming an operator identity.
func (a *operatorAuth) identityOK(ctx context.Context) bool {
	if len(a.identities) == 0 {
		return false
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return false // no client certificate, or not one the client CA verified
	}
	leaf := ti.State.VerifiedChains[0][0]
	if a.identities[leaf.Subject.CommonName] {
		return true
	}
	for _, n := range leaf.DNSNames {
		if a.identities[n] {
			return true
		}
	}
	for _, u := range leaf.URIs {
		if a.identities[u.String()] {
			return true
		}
	}
	return false
}

// denied is the error for a caller without the role.
func (a *operatorAuth) denied(what string) error {
	msg := what + " needs the operator role: "
	switch {
	case a.token != nil && len(a.identities) > 0:
		msg += "send the operator token (authorization: Bearer TOKEN; yardctl --token-file) or call over mutual TLS with an operator certificate"
	case a.token != nil:
		msg += "send the operator token (authorization: Bearer TOKEN; yardctl --token-file)"
	case len(a.identities) > 0:
		msg += "call over mutual TLS with a certificate named in the router's --operator-identities"
	default:
		msg += "this router listens beyond loopback and has no --operator-token-file or --operator-identities to tell an operator by"
	}
	return status.Error(codes.Unauthenticated, msg)
}

// unary guards the operator methods of the gRPC service.
func (a *operatorAuth) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !operatorMethods[info.FullMethod] {
		return handler(ctx, req)
	}
	explain := info.FullMethod == routerv1.Router_Explain_FullMethodName
	if a.open(explain, false) || a.identityOK(ctx) {
		return handler(ctx, req)
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for _, v := range md.Get("authorization") {
			if a.bearerOK(v) {
				return handler(ctx, req)
			}
		}
	}
	return nil, a.denied(strings.TrimPrefix(info.FullMethod, "/"+routerv1.Router_ServiceDesc.ServiceName+"/"))
}

// rest guards a REST operator route: 401, in the REST API's error shape,
// without the role.
func (a *operatorAuth) rest(gw *runtime.ServeMux, what string, explain bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.open(explain, true) || a.bearerOK(r.Header.Get("Authorization")) {
			next.ServeHTTP(w, r)
			return
		}
		runtime.HTTPError(r.Context(), gw, lifecycle.RESTMarshaler, challenge{w}, r, a.denied(what))
	})
}

// challenge sets a standard WWW-Authenticate on the 401 (grpc-gateway puts
// the error message there).
type challenge struct{ http.ResponseWriter }

func (c challenge) WriteHeader(code int) {
	c.Header().Set("WWW-Authenticate", `Bearer realm="switchyard-router"`)
	c.ResponseWriter.WriteHeader(code)
}
