package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUsageGolden: yardctl usage's table, csv and json, and the query it
// sends the meter.
func TestUsageGolden(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		args         []string
		query        string
	}{
		{"usage-by-model", "usage-by-model.json", []string{"--tenant", "team-a", "--by", "model", "--since", "24h"}, "by=model&since=24h&tenant=team-a"},
		{"usage-by-hour", "usage-by-hour.json", []string{"--tenant", "team-a", "--by", "hour", "--from", "2026-12-01T09:30:00Z", "--to", "2026-12-01T12:45:00Z"},
			"by=hour&from=2026-12-01T09%3A30%3A00Z&tenant=team-a&to=2026-12-01T12%3A45%3A00Z"},
		{"usage-by-hour-csv", "usage-by-hour.json", []string{"--tenant", "team-a", "--by", "hour", "-o", "csv"}, "by=hour&tenant=team-a"},
		{"usage-total", "usage-total.json", []string{"--tenant", "team-a"}, "tenant=team-a"},
		{"usage-total-json", "usage-total.json", []string{"--tenant", "team-a", "-o", "json"}, "tenant=team-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, got := replay(t, "meter", http.StatusOK, tc.answer) // recorded from a real meter's usage API
			code, out, errOut := runCLI(t, "", append([]string{"usage", "--meter", srv.URL}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got.method != http.MethodGet || got.path != "/v1/usage" || got.query != tc.query {
				t.Errorf("the meter got %s?%s, want /v1/usage?%s", got.path, got.query, tc.query)
			}
			golden(t, tc.name, out)
		})
	}
}

// A meter's refusal reaches the user with its message; bad flags never
// reach the meter.
func TestUsageErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":{"message":"the usage API needs the operator's bearer token"}}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--meter", srv.URL, "--tenant", "a"}, 1, "the usage API needs the operator's bearer token (give the meter's operator token with --token-file)"},
		{[]string{"--meter", srv.URL}, 1, "--tenant is required"},
		{[]string{"--meter", srv.URL, "--tenant", "a", "--by", "week"}, 1, `--by: by "week"`},
		{[]string{"--meter", srv.URL, "--tenant", "a", "-o", "xml"}, 2, "want table, json or csv"},
	} {
		code, _, errOut := runCLI(t, "", append([]string{"usage"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q, want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}
