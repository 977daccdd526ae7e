package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/kvblock"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/prompt"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
)

// maxModelLen bounds the client-chosen model name echoed in rejections.
const maxModelLen = 256

func checkModel(model string) error {
	switch {
	case model == "":
		return errEmptyModel
	case len(model) > maxModelLen:
		return errModelTooLong
	}
	return nil
}

// Request errors. toStatus maps them to gRPC codes; grpc-gateway maps those
// to HTTP statuses for the REST surface.
var (
	errEmptyModel     = errors.New("model is required")
	errModelTooLong   = fmt.Errorf("model name longer than %d bytes", maxModelLen)
	errEmptyRequestID = errors.New("request_id is required: in-flight tracking and completions are keyed by it")
)

// flowError is a flow-control field out of its range, named.
type flowError struct{ msg string }

func (e *flowError) Error() string { return e.msg }

// checkFlow checks the request's flow-control fields.
func checkFlow(req *routerv1.RouteRequest) error {
	var msgs []string
	if v := req.GetQueueThreshold(); v < 0 {
		msgs = append(msgs, fmt.Sprintf("queue_threshold %d: want 0 (off) or more", v))
	}
	if v := req.GetKvCacheThreshold(); !(v >= 0 && v <= 1) {
		msgs = append(msgs, fmt.Sprintf("kv_cache_threshold %g: want 0 (off) to 1", v))
	}
	if v := req.GetKvReserve(); !(v >= 0 && v < 1) {
		msgs = append(msgs, fmt.Sprintf("kv_reserve %g: want 0 (none) to less than 1", v))
	}
	if v := req.GetMaxOutputTokens(); v < 0 {
		msgs = append(msgs, fmt.Sprintf("max_output_tokens %d: want 0 (unknown) or more", v))
	}
	if len(msgs) == 0 {
		return nil
	}
	return &flowError{strings.Join(msgs, "; ")}
}

// limitError is a request over one of the per-request limits, named by
// its flag for the operator and the client alike.
type limitError struct{ err *prompt.LimitError }

func (e *limitError) Error() string {
	flag := map[prompt.Limit]string{
		prompt.LimitMessages:      "max-messages",
		prompt.LimitPromptBytes:   "max-prompt-bytes",
		prompt.LimitTemplateBytes: "max-template-bytes",
	}[e.err.Limit]
	return e.err.Error() + " (the router's --" + flag + ")"
}

// toStatus is the one place router errors become gRPC statuses.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errEmptyModel), errors.Is(err, errEmptyRequestID):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errModelTooLong):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.As(err, new(*limitError)), errors.As(err, new(*flowError)):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// publisher is where decisions go for the other replicas; nil-safe through
// noPublisher when NATS is disabled.
type publisher interface {
	Publish(replica.Decision)
}

type noPublisher struct{}

func (noPublisher) Publish(replica.Decision) {}

// blockSizer reports the block size a worker's KV events declared, 0 when
// it has sent none.
type blockSizer interface {
	BlockSize(worker string) int
}

type noBlockSizes struct{}

func (noBlockSizes) BlockSize(string) int { return 0 }

// service implements routerv1.RouterServer. Route and Explain are one
// decision (decide.go): the request's prompt and tags, its candidates and
// what each caches of the prompt, their predicted TTFT and score (the
// load table), the policy program's pick, and the records the pick leaves
// (in flight, speculative entries, the decision published to the other
// replicas).
//
// Two indexes answer "what is cached where":
//
//   - kv holds the blocks the kvtracker reports (kvsync keeps it), in
//     Switchyard's token-block hashes, plus speculative entries;
//   - approx remembers the router's own decisions for a TTL: keyed on
//     chunks of prompt text for models without a tokenizer, and on the
//     token-block hashes for workers that send no KV events at all (no
//     kvtracker, or a vLLM started without --kv-events-config).
type service struct {
	routerv1.UnimplementedRouterServer
	table *load.Table
	// specGen counts the speculations written (decision.Committed), so a
	// decision can tell whether its lookup is still current.
	specGen     atomic.Uint64
	pub         publisher
	metrics     *metrics
	kv          *kvblock.Index
	approx      *kvblock.Index
	sizes       blockSizer
	toks        tokenizers
	tc          *tokChecker
	classifiers []classifier
	specTTL     time.Duration
	approxTTL   time.Duration
	limits      prompt.Limits
	scratch     sync.Pool // *decision
	// pol is the policy state decided by: policyd's snapshot, or
	// noPolicies until one arrives and without policyd.
	pol atomic.Pointer[policyState]
}

// newService is the decision path of a router configured by cfg, with no
// peers (pub) and no KV events (sizes) until Serve connects them.
func newService(cfg Config, table *load.Table, m *metrics, kv, approx *kvblock.Index, toks tokenizers) (*service, error) {
	cls, err := newClassifiers(cfg.Classifiers)
	if err != nil {
		return nil, err
	}
	s := &service{
		table: table, pub: noPublisher{}, metrics: m,
		kv: kv, approx: approx, sizes: noBlockSizes{}, toks: toks, classifiers: cls,
		specTTL: cfg.SpeculativeTTL, approxTTL: cfg.ApproxTTL, limits: cfg.limits(),
	}
	s.pol.Store(noPolicies())
	return s, nil
}

func (s *service) ListEndpoints(ctx context.Context, req *routerv1.ListEndpointsRequest) (*routerv1.ListEndpointsResponse, error) {
	views := s.table.Endpoints(req.GetModel())
	resp := &routerv1.ListEndpointsResponse{Endpoints: make([]*routerv1.Endpoint, 0, len(views))}
	for _, v := range views {
		resp.Endpoints = append(resp.Endpoints, endpointProto(v))
	}
	return resp, nil
}

func endpointProto(v load.EndpointView) *routerv1.Endpoint {
	return &routerv1.Endpoint{
		Id:           v.ID,
		Url:          v.URL,
		Models:       v.Models,
		Kind:         targetKind(v.Kind),
		Healthy:      v.Healthy,
		LastError:    v.LastError,
		Waiting:      v.Load.Waiting,
		Running:      v.Load.Running,
		InFlight:     v.Load.InFlight,
		KvCacheUsage: v.KVCacheUsage,
		LastScrape:   timestampOrNil(v.LastScrape),

		RecentPredictedTtftSeconds: v.RecentPredictedTTFT,
		RecentObservedTtftSeconds:  v.RecentObservedTTFT,
		RecentTtftError:            v.RecentTTFTError,
		AccuracySamples:            int64(v.AccuracySamples),
	}
}

// timestampOrNil leaves a time never set (an endpoint not scraped yet)
// out of the message rather than claiming the year 1.
func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func targetKind(kind string) routerv1.TargetKind {
	switch kind {
	case endpoints.KindLocal, "":
		return routerv1.TargetKind_TARGET_KIND_LOCAL
	case endpoints.KindProvider:
		return routerv1.TargetKind_TARGET_KIND_PROVIDER
	}
	return routerv1.TargetKind_TARGET_KIND_UNSPECIFIED
}
