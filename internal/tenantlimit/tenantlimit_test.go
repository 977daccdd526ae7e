package tenantlimit

import (
	"strings"
	"testing"
)

func TestLimitsValidate(t *testing.T) {
	ok := []Limits{
		{},
		{RequestsPerMinute: 60},
		{InputTokensPerMinute: 1000, OutputTokensPerMinute: 500, TokensPerDay: 1500, TokensPerMonth: 1500},
		{TokensPerMonth: 10},
		{RequestsPerMinute: MaxLimit},
	}
	for _, l := range ok {
		if err := l.Validate("limits"); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
	bad := map[string]Limits{
		"limits.requestsPerMinute: -1: want 0 (no limit) to 1099511627776":              {RequestsPerMinute: -1},
		"limits.tokensPerMonth: 2199023255552":                                          {TokensPerMonth: 2 * MaxLimit},
		"limits.tokensPerDay: 100 is less than one minute's input+output tokens (1500)": {InputTokensPerMinute: 1000, OutputTokensPerMinute: 500, TokensPerDay: 100},
		"limits.tokensPerMonth: 10 is less than tokensPerDay (20)":                      {TokensPerDay: 20, TokensPerMonth: 10},
	}
	for want, l := range bad {
		err := l.Validate("limits")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", l, err, want)
		}
	}
	// Every error at once.
	err := Limits{RequestsPerMinute: -1, OutputTokensPerMinute: -2}.Validate("x")
	if err == nil || !strings.Contains(err.Error(), "x.requestsPerMinute") || !strings.Contains(err.Error(), "x.outputTokensPerMinute") {
		t.Errorf("both errors: %v", err)
	}
}
