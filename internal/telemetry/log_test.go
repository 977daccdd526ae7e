package telemetry

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNewLogger(t *testing.T) {
	tests := []struct {
		cfg     LogConfig
		wantErr string
	}{
		{LogConfig{}, ""},
		{LogConfig{Level: "debug", Format: "json"}, ""},
		{LogConfig{Level: "WARN", Format: "console"}, ""},
		{LogConfig{Level: "loud"}, `log level "loud"`},
		{LogConfig{Format: "xml"}, `log format "xml"`},
	}
	for _, tc := range tests {
		_, err := NewLogger(tc.cfg, &bytes.Buffer{})
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.wantErr)
		}
	}
	var buf bytes.Buffer
	log, err := NewLogger(LogConfig{Level: "info"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug().Msg("hidden")
	log.Info().Str("k", "v").Msg("shown")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["message"] != "shown" || line["k"] != "v" || line["time"] == nil {
		t.Errorf("log output %q (%v)", buf.String(), err)
	}
}
