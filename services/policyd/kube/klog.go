package kube

import (
	"fmt"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"
)

// routeKlog sends klog, client-go's log (reflector and watch errors, the
// API server's warnings), into the service's log: otherwise its
// plain-text lines go to stderr between policyd's JSON objects, and a log
// pipeline either drops them or fails on them. klog is one per process:
// the last source built takes it.
//
// klog keeps deciding its verbosity (its -v, 0 here: client-go's V(0)
// lines and errors pass, its debugging does not). logr has no warning
// level: klog's warnings arrive as info.
func routeKlog(log zerolog.Logger) {
	klog.SetLogger(logr.New(&zerologSink{log: log.With().Str("from", "klog").Logger()}))
}

// zerologSink is a logr.LogSink writing to zerolog: logr's V(0) is info,
// higher verbosity debug, errors error. Keys and values become fields.
type zerologSink struct {
	log  zerolog.Logger
	name string
}

var _ logr.LogSink = (*zerologSink)(nil)

func (s *zerologSink) Init(logr.RuntimeInfo) {}

// Enabled follows the zerolog logger's level.
func (s *zerologSink) Enabled(level int) bool {
	return s.log.GetLevel() <= zerologLevel(level) && zerolog.GlobalLevel() <= zerologLevel(level)
}

func (s *zerologSink) Info(level int, msg string, kvs ...any) {
	s.write(s.log.WithLevel(zerologLevel(level)), msg, kvs)
}

func (s *zerologSink) Error(err error, msg string, kvs ...any) {
	s.write(s.log.Error().Err(err), msg, kvs)
}

func (s *zerologSink) write(ev *zerolog.Event, msg string, kvs []any) {
	if ev == nil {
		return
	}
	if s.name != "" {
		ev = ev.Str("logger", s.name)
	}
	ev.Fields(fields(kvs)).Msg(msg)
}

func (s *zerologSink) WithValues(kvs ...any) logr.LogSink {
	return &zerologSink{log: s.log.With().Fields(fields(kvs)).Logger(), name: s.name}
}

func (s *zerologSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "/" + name
	}
	return &zerologSink{log: s.log, name: name}
}

// zerologLevel maps logr's verbosity (0 the most important) to zerolog.
func zerologLevel(v int) zerolog.Level {
	if v <= 0 {
		return zerolog.InfoLevel
	}
	return zerolog.DebugLevel
}

// fields is logr's alternating keys and values as zerolog's field list:
// a value that marshals itself for logs (klog.KObj, say) is replaced by
// what it marshals to, a key that is not a string is printed, and a
// dangling key gets a null value.
func fields(kvs []any) []any {
	out := make([]any, 0, len(kvs)+1)
	for i := 0; i < len(kvs); i += 2 {
		k, ok := kvs[i].(string)
		if !ok {
			k = fmt.Sprint(kvs[i])
		}
		var v any
		if i+1 < len(kvs) {
			v = kvs[i+1]
		}
		if m, ok := v.(logr.Marshaler); ok {
			v = m.MarshalLog()
		}
		out = append(out, k, v)
	}
	return out
}
