package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
)

// PromptCounter sends text as the only user message of a request and
// returns the prompt tokens the server reports for it.
type PromptCounter func(ctx context.Context, text string) (int, error)

// calibrationTokens is the probe size: long enough that word boundaries
// average out, short enough to cost the server nothing noticeable.
const calibrationTokens = 2000

// Calibrate measures the server's characters per token on the generator's
// text: the chat template's fixed overhead is taken from a one-word probe
// and subtracted from a long one.
func Calibrate(ctx context.Context, count PromptCounter) (float64, error) {
	r := rand.New(rand.NewPCG(0xca1, 0xb7a7e))
	short := words[0]
	long := Text(r, calibrationTokens, DefaultCharsPerToken)
	base, err := count(ctx, short)
	if err != nil {
		return 0, fmt.Errorf("calibrate: %w", err)
	}
	n, err := count(ctx, long)
	if err != nil {
		return 0, fmt.Errorf("calibrate: %w", err)
	}
	if n <= base {
		return 0, fmt.Errorf("calibrate: %d prompt tokens for %d characters, %d for %d: the server's usage is not usable", n, len(long), base, len(short))
	}
	cpt := float64(len(long)-len(short)) / float64(n-base)
	if cpt < 0.5 || cpt > 64 {
		return 0, fmt.Errorf("calibrate: %.2f characters per token is implausible", cpt)
	}
	return cpt, nil
}
