package policy

// ReadsTag reports whether any rule of the program, Route or Guard, reads
// a tag for which match returns true: in its matches (matches.tag) or in
// one of its exclude filters' conditions (if.tag). A classifier that costs
// something asks it first, and derives its tags only for a program that
// reads them: a tag no rule reads changes no decision.
//
// The cost is a walk over the program's rules (a few string comparisons
// per rule), far below what it spares.
func (p *Program) ReadsTag(match func(tag string) bool) bool {
	if p == nil {
		return false
	}
	for _, r := range p.route {
		if ruleReadsTag(r, match) {
			return true
		}
	}
	for _, g := range p.guards {
		for _, r := range g {
			if ruleReadsTag(r, match) {
				return true
			}
		}
	}
	return false
}

func ruleReadsTag(r *Rule, match func(string) bool) bool {
	for _, m := range r.Matches {
		if m.Tag != "" && match(m.Tag) {
			return true
		}
	}
	for _, f := range r.Filters {
		if f.If != nil && f.If.Tag != "" && match(f.If.Tag) {
			return true
		}
	}
	return false
}
