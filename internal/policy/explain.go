package policy

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Summary renders the decision in one line, for the router's
// Decision.reason and logs.
func (d *Decision) Summary(bs []Backend) string {
	var b strings.Builder
	switch d.Outcome {
	case Routed:
		c := &bs[d.Chosen]
		fmt.Fprintf(&b, "%s (%s %s", c.ID, c.Type, c.Model)
		if c.Group != "" {
			fmt.Fprintf(&b, " %s", c.Group)
		}
		b.WriteString(") by ")
		if d.Rule != nil {
			fmt.Fprintf(&b, "rule %s, tier %s", d.Rule.label, d.Tier.label)
		} else {
			b.WriteString("default routing")
		}
		fmt.Fprintf(&b, ", %s %s", d.Objective, formatScore(d.Objective, d.Score))
	case Rejected:
		fmt.Fprintf(&b, "rejected by rule %s (onEmpty: Reject): no candidate left", d.Rejector.label)
	default:
		b.WriteString("no backend serves the request")
	}
	if d.Fallbacks > 0 {
		fmt.Fprintf(&b, "; %d earlier matching rule(s) found no backend", d.Fallbacks)
	}
	if len(d.Guards) > 0 {
		b.WriteString("; guards")
		for _, g := range d.Guards {
			b.WriteByte(' ')
			b.WriteString(g.label)
		}
	}
	fmt.Fprintf(&b, "; %d eligible", d.Candidates)
	return b.String()
}

// RejectMessage is a client-safe message for a rejected request: it names
// the policy and rule but no backend.
func (d *Decision) RejectMessage() string {
	if d.Outcome == Rejected && d.Rejector != nil {
		return "rejected by policy " + d.Rejector.Policy + " rule " + d.Rejector.Name + ": no allowed backend can serve the request"
	}
	return "no backend can serve the request"
}

// Explain writes the decision and the fate of every backend, as yardctl
// explain prints it.
func (d *Decision) Explain(w io.Writer, req *Request, bs []Backend) error {
	var b strings.Builder
	fmt.Fprintf(&b, "request:  model=%s", req.Model)
	if req.Tenant != "" {
		fmt.Fprintf(&b, " tenant=%s", req.Tenant)
	}
	if len(req.Tags) > 0 {
		fmt.Fprintf(&b, " tags=%s", strings.Join(req.Tags, ","))
	}
	b.WriteByte('\n')
	switch d.Outcome {
	case Routed:
		c := &bs[d.Chosen]
		fmt.Fprintf(&b, "target:   %s (%s, model %s", c.ID, c.Type, c.Model)
		if c.Group != "" {
			fmt.Fprintf(&b, ", %s", c.Group)
		}
		b.WriteString(")\n")
		if d.Rule != nil {
			fmt.Fprintf(&b, "policy:   %s\nrule:     %s\ntier:     %s\n", d.Rule.Policy, d.Rule.Name, d.Tier.label)
		} else {
			b.WriteString("rule:     none matched with a backend: default routing (lowest predicted TTFT)\n")
		}
		fmt.Fprintf(&b, "score:    %s %s\n", d.Objective, formatScore(d.Objective, d.Score))
	case Rejected:
		fmt.Fprintf(&b, "target:   none: REJECTED\npolicy:   %s\nrule:     %s (onEmpty: Reject)\n", d.Rejector.Policy, d.Rejector.Name)
	default:
		b.WriteString("target:   none: no backend serves the request\n")
	}
	if d.Fallbacks > 0 {
		fmt.Fprintf(&b, "fallback: %d earlier matching rule(s) found no backend\n", d.Fallbacks)
	}
	for _, g := range d.Guards {
		fmt.Fprintf(&b, "guard:    %s\n", g.label)
	}
	b.WriteString("backends:\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tTYPE\tGROUP\tMODEL\tQUEUED\tRUNNING\tKV\tTTFT\tCACHED\tVERDICT")
	for i := range bs {
		c := &bs[i]
		v := d.Trace[i]
		verdict := v.Status.String()
		switch v.Status {
		case Dropped:
			verdict += " by " + v.By
			if v.Guard {
				verdict += " (guard)"
			}
		case Unavailable:
			verdict += ": " + v.By
		case Lost, Chosen:
			verdict += " (" + formatScore(d.Objective, v.Score) + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%s\t%d\t%s\n", c.ID, c.Type, dash(c.Group), c.Model,
			c.QueuedPrompts, c.RunningRequests, c.KVCacheUsage, formatScore(PredictedTTFT, c.PredictedTTFT), c.CachedTokens, verdict)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatScore(o Objective, v float64) string {
	switch o {
	case PredictedTTFT:
		return strconv.FormatFloat(v, 'f', 3, 64) + "s"
	case KVCacheUsage, Price:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
