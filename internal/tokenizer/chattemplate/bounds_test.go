package chattemplate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRenderBounds: a render stops when its context is done (even one
// whose work is exponential in a small input) and when its output
// outgrows its cap (even when a repetition builds it at once); within
// both it renders as Render does.
func TestRenderBounds(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	exponential := `{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}`
	loop := `{% for m in messages %}{{ m.content }}{% endfor %}`
	msgs := make([]any, 10000)
	for i := range msgs {
		d := NewDict()
		d.Set("content", "hello ")
		msgs[i] = d
	}
	tests := []struct {
		name, src string
		ctx       context.Context
		maxBytes  int
		wantErr   error
	}{
		{"exponential macro, canceled", exponential, canceled, 0, context.Canceled},
		{"loop, canceled", loop, canceled, 0, context.Canceled},
		{"loop over its cap", loop, context.Background(), 1000, ErrTooLarge},
		{"repetition over its cap", `{{ '=' * 1000000 }}`, context.Background(), 1000, ErrTooLarge},
		{"repetition without a cap", `{{ 'xy' * 9000000000000000000 }}`, context.Background(), 0, nil},
		{"loop within its cap", loop, context.Background(), 60000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := Compile(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			out, err := tmpl.render(tt.ctx, map[string]any{"messages": msgs}, time.Now, 0, tt.maxBytes)
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case tt.name == "repetition without a cap":
				var re *RenderError
				if !errors.As(err, &re) || !strings.Contains(re.Msg, "too large") {
					t.Fatalf("err = %v, want a RenderError refusing the repetition", err)
				}
			case tt.wantErr == nil && tt.name != "repetition without a cap":
				if err != nil || out != strings.Repeat("hello ", len(msgs)) {
					t.Fatalf("err = %v, %d bytes", err, len(out))
				}
			}
		})
	}
}
