package policyd

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-dev/switchyard/internal/policy"
	policyv1 "github.com/switchyard-dev/switchyard/proto/switchyard/policy/v1"
)

// Limits on a Validate request.
const (
	maxValidateFiles = 256
	maxValidateBytes = 8 << 20
)

// service implements policyv1.PolicyServiceServer over the state.
type service struct {
	policyv1.UnimplementedPolicyServiceServer
	st      *state
	metrics *metrics
	// quit is closed when shutdown begins: Watch streams never end on
	// their own, and GracefulStop waits for every stream.
	quit chan struct{}
}

func (s *service) Watch(req *policyv1.WatchRequest, stream policyv1.PolicyService_WatchServer) error {
	ctx := stream.Context()
	after := req.GetAfterRevision()
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()
	for {
		cur, changed := s.st.current()
		if cur != nil && cur.revision > after {
			if err := stream.Send(&policyv1.WatchResponse{Snapshot: cur.wire}); err != nil {
				return err
			}
			after = cur.revision
			continue // a newer one may have arrived while sending
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.quit:
			return status.Error(codes.Unavailable, "policyd is shutting down")
		case <-changed:
		}
	}
}

func (s *service) GetSnapshot(ctx context.Context, _ *policyv1.GetSnapshotRequest) (*policyv1.GetSnapshotResponse, error) {
	cur, _ := s.st.current()
	_, diags, at := s.st.sources()
	resp := &policyv1.GetSnapshotResponse{Diagnostics: policy.DiagnosticsToProto(diags)}
	if cur != nil {
		resp.Snapshot = cur.wire
	}
	if !at.IsZero() {
		resp.CheckedAt = timestamppb.New(at)
	}
	return resp, nil
}

func (s *service) Validate(ctx context.Context, req *policyv1.ValidateRequest) (*policyv1.ValidateResponse, error) {
	if len(req.GetFiles()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no files to validate")
	}
	if len(req.GetFiles()) > maxValidateFiles {
		return nil, status.Errorf(codes.InvalidArgument, "more than %d files", maxValidateFiles)
	}
	total := 0
	var objs []*policy.Object
	var diags policy.Diagnostics
	for i, f := range req.GetFiles() {
		total += len(f.GetContent())
		if total > maxValidateBytes {
			return nil, status.Errorf(codes.InvalidArgument, "files larger than %d bytes in total", maxValidateBytes)
		}
		name := f.GetName()
		if name == "" {
			name = fmt.Sprintf("file-%d.yaml", i+1)
		}
		o, d := policy.ParseYAML(name, f.GetContent())
		objs = append(objs, o...)
		diags = append(diags, d...)
	}
	if !req.GetStandalone() {
		objs = mergeObjects(s.currentObjects(), objs)
	}
	_, d := policy.Compile(objs)
	diags = append(diags, d...)
	diags.Sort()
	return &policyv1.ValidateResponse{Valid: !diags.HasErrors(), Diagnostics: policy.DiagnosticsToProto(diags)}, nil
}

func (s *service) currentObjects() []*policy.Object {
	objs, _, _ := s.st.sources()
	return objs
}

// mergeObjects returns base with every object of the same kind and name
// as one in over replaced by it, and the rest of over added.
func mergeObjects(base, over []*policy.Object) []*policy.Object {
	replaced := make(map[string]bool, len(over))
	for _, o := range over {
		replaced[o.Kind+"/"+o.Name] = true
	}
	out := make([]*policy.Object, 0, len(base)+len(over))
	for _, o := range base {
		if !replaced[o.Kind+"/"+o.Name] {
			out = append(out, o)
		}
	}
	return append(out, over...)
}
