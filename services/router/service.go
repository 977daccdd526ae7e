package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/endpoints"
	"github.com/switchyard-dev/switchyard/services/router/internal/load"
	"github.com/switchyard-dev/switchyard/services/router/internal/replica"
)

const strategyLeastLoad = "least-load"

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

// toStatus is the one place router errors become gRPC statuses.
func toStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errEmptyModel), errors.Is(err, errEmptyRequestID):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errModelTooLong):
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

// service implements routerv1.RouterServer over the load table.
type service struct {
	routerv1.UnimplementedRouterServer
	table   *load.Table
	pub     publisher
	metrics *metrics
}

func (s *service) Route(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.RouteResponse, error) {
	start := time.Now()
	resp, err := s.route(req, start)
	s.metrics.routeDuration.Observe(time.Since(start).Seconds())
	return resp, toStatus(err)
}

func (s *service) route(req *routerv1.RouteRequest, now time.Time) (*routerv1.RouteResponse, error) {
	model := req.GetModel()
	if err := checkModel(model); err != nil {
		return nil, err
	}
	if req.GetRequestId() == "" {
		return nil, errEmptyRequestID
	}
	// The body is not read yet: load-only routing needs no prompt.
	choice, out := s.table.Route(model, req.GetExcludeEndpoints(), req.GetRequestId(), now)
	if out != load.Routed {
		label := model
		if out == load.ModelNotFound {
			label = unknownModel
		}
		s.metrics.decisions.WithLabelValues(label, "", out.String()).Inc()
		return rejection(model, out), nil
	}
	s.pub.Publish(replica.Decision{
		RequestID:  req.GetRequestId(),
		EndpointID: choice.EndpointID,
		Model:      model,
		Tenant:     req.GetTenant(),
		At:         now,
	})
	s.metrics.decisions.WithLabelValues(model, choice.EndpointID, out.String()).Inc()
	return routed(model, choice), nil
}

func routed(model string, c load.Choice) *routerv1.RouteResponse {
	return &routerv1.RouteResponse{
		Target: &routerv1.Target{
			Id:          c.EndpointID,
			Url:         c.URL,
			Kind:        targetKind(c.Kind),
			ServedModel: model,
		},
		Decision: &routerv1.Decision{
			Strategy: strategyLeastLoad,
			Reason:   c.Reason(),
		},
	}
}

func rejection(model string, out load.Outcome) *routerv1.RouteResponse {
	r := &routerv1.Rejection{}
	switch out {
	case load.ModelNotFound:
		r.Code = routerv1.RejectCode_REJECT_CODE_MODEL_NOT_FOUND
		r.Message = "no endpoint serves model " + model
	default:
		r.Code = routerv1.RejectCode_REJECT_CODE_NO_HEALTHY_ENDPOINT
		r.Message = "no healthy endpoint for model " + model + " (all unhealthy or excluded)"
	}
	return &routerv1.RouteResponse{Rejection: r, Decision: &routerv1.Decision{Strategy: strategyLeastLoad}}
}

func (s *service) Explain(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.ExplainResponse, error) {
	model := req.GetModel()
	if err := checkModel(model); err != nil {
		return nil, toStatus(err)
	}
	rows, choice, out := s.table.Explain(model, req.GetExcludeEndpoints())
	resp := &routerv1.ExplainResponse{Candidates: make([]*routerv1.Candidate, 0, len(rows))}
	if out == load.Routed {
		resp.Result = routed(model, choice)
	} else {
		resp.Result = rejection(model, out)
	}
	for _, r := range rows {
		resp.Candidates = append(resp.Candidates, &routerv1.Candidate{
			Endpoint:       endpointProto(r.Endpoint),
			Eligible:       r.Eligible,
			ExcludedReason: r.ExcludedReason,
			InFlight:       r.Endpoint.Load.InFlight,
			Waiting:        r.Endpoint.Load.Waiting,
			Running:        r.Endpoint.Load.Running,
			Score:          float64(r.Score),
			Chosen:         r.Chosen,
		})
	}
	return resp, nil
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
	e := &routerv1.Endpoint{
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
	}
	if !v.LastScrape.IsZero() {
		e.LastScrape = timestamppb.New(v.LastScrape)
	}
	return e
}

func targetKind(kind string) routerv1.TargetKind {
	if kind == endpoints.KindLocal || kind == "" {
		return routerv1.TargetKind_TARGET_KIND_LOCAL
	}
	return routerv1.TargetKind_TARGET_KIND_UNSPECIFIED
}
