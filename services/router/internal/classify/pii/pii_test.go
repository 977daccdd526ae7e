package pii_test

import (
	"context"
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/policy"
	routerv1 "github.com/switchyard-dev/switchyard/proto/switchyard/router/v1"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/classifytest"
	"github.com/switchyard-dev/switchyard/services/router/internal/classify/pii"
)

const chat = routerv1.ApiKind_API_KIND_CHAT_COMPLETIONS

// guard is a program whose Guard policy (pii-stays-local's rule) reads
// pii-detected.
func guard(t testing.TB) *policy.Program {
	t.Helper()
	objs, diags := policy.ParseYAML("p.yaml", []byte(`apiVersion: switchyard.dev/v1alpha1
kind: InferencePolicy
metadata: {name: pii-stays-local, namespace: inference}
spec:
  rules:
  - name: serve
    route:
      exclude:
      - name: pii-never-leaves-cluster
        if: {tag: pii-detected}
        drop: {backend: {type: Provider}}
      onEmpty: Reject
---
apiVersion: switchyard.dev/v1alpha1
kind: GatewayBackend
metadata: {name: gb, namespace: inference}
spec:
  policies:
  - {name: pii-stays-local, mode: Guard}
`))
	snap, d := policy.Compile(objs)
	if diags.HasErrors() || d.HasErrors() || snap == nil {
		t.Fatal(diags, d)
	}
	return snap.Program("gb")
}

func chatBody(t testing.TB, msgs ...string) []byte {
	t.Helper()
	type m struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	var ms []m
	for i, c := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		ms = append(ms, m{role, c})
	}
	b, err := json.Marshal(map[string]any{"model": "m", "messages": ms})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func classifyBody(t testing.TB, prog *policy.Program, api routerv1.ApiKind, body []byte) []string {
	t.Helper()
	c, _ := pii.New()
	tags, err := c.Classify(context.Background(), &classify.Request{Program: prog, API: api, Body: body}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tags
}

func TestClassify(t *testing.T) {
	prog := guard(t)
	for _, tc := range []struct {
		name string
		api  routerv1.ApiKind
		body string
		want []string
	}{
		{"card in a message", chat, string(chatBody(t, "hello", "hi", "my card is 4111 1111 1111 1111")), []string{"pii-detected", "pii:card"}},
		{"kinds in order", chat, string(chatBody(t, "IP 10.0.0.1, mail a.b@example.com, マイナンバー 123456789018")), []string{"pii-detected", "pii:email", "pii:mynumber", "pii:ip"}},
		{"nothing", chat, string(chatBody(t, "Summarise the meeting of 2024-01-15 (ticket INV-2024-0042).")), nil},
		{"content parts", chat, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"SSN 078-05-1120"}]}]}`, []string{"pii-detected", "pii:ssn"}},
		{"tool call arguments", chat, `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"pay","arguments":"{\"iban\":\"DE89370400440532013000\"}"}}]}]}`, []string{"pii-detected", "pii:iban"}},
		{"documents", chat, `{"model":"m","messages":[{"role":"user","content":"summarise"}],"documents":[{"text":"call 03-1234-5678"}]}`, []string{"pii-detected", "pii:phone"}},
		{"escaped digits are read", chat, `{"model":"m","messages":[{"role":"user","content":"\u0034111111111111111"}]}`, []string{"pii-detected", "pii:card"}},
		{"completions batch", routerv1.ApiKind_API_KIND_COMPLETIONS, `{"model":"m","prompt":["fine","mail me at x@example.org"]}`, []string{"pii-detected", "pii:email"}},
		{"completions token ids", routerv1.ApiKind_API_KIND_COMPLETIONS, `{"model":"m","prompt":[1,2,3]}`, nil},
		{"api sniffed", routerv1.ApiKind_API_KIND_UNSPECIFIED, string(chatBody(t, "x@example.org")), []string{"pii-detected", "pii:email"}},
		{"not JSON", chat, `{"model":`, nil},
		{"empty", chat, ``, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classifyBody(t, prog, tc.api, []byte(tc.body)); !slices.Equal(got, tc.want) {
				t.Fatalf("tags %v, want %v", got, tc.want)
			}
		})
	}
}

// A program that reads none of the classifier's tags costs nothing: the
// body is not even read.
func TestClassifyOnlyWhenRead(t *testing.T) {
	body := chatBody(t, "card 4111111111111111")
	classifytest.Check(t, pii.New, []classifytest.Case{
		{Name: "the default program", Program: policy.DefaultProgram()},
		{Name: "tags allowed but read by no rule", Program: classifytest.Program(t)},
	})
	for _, p := range []*policy.Program{policy.DefaultProgram(), classifytest.Program(t), nil} {
		if got := classifyBody(t, p, chat, body); got != nil {
			t.Fatalf("tags %v from a program reading none", got)
		}
	}
	if got := classifyBody(t, guard(t), chat, body); !slices.Equal(got, []string{"pii-detected", "pii:card"}) {
		t.Fatalf("tags %v", got)
	}
	// Tagged pii-detected already (tags header, tenant) and no rule reads
	// a kind: not scanned again.
	c, _ := pii.New()
	got, err := c.Classify(context.Background(), &classify.Request{Program: guard(t), API: chat, Body: body}, []string{"pii-detected"})
	if err != nil || !slices.Equal(got, []string{"pii-detected"}) {
		t.Fatalf("tags %v, %v", got, err)
	}
}

// Scan's checks, value by value.
func TestScanValues(t *testing.T) {
	for _, tc := range []struct {
		text string
		want string // kind, or "" for none
	}{
		{"123456789018", "mynumber"}, // the check digit of 12345678901 is 8
		{"123456789012", ""},
		{"1234 5678 9018", "mynumber"},
		{"4111-1111-1111-1111", "card"},
		{"4111-1111-1111-1112", ""},
		{"4111 1111 1111 1111 2222", ""}, // 20 digits
		{"378282246310005", "card"},
		{"1111111111111117", ""}, // passes Luhn, starts with 1: no network
		{"078-05-1120", "ssn"},
		{"000-05-1120", ""},
		{"666-05-1120", ""},
		{"900-05-1120", ""},
		{"078-00-1120", ""},
		{"078-05-0000", ""},
		{"GB82 WEST 1234 5698 7654 32", "iban"},
		{"GB82 WEST 1234 5698 7654 33", ""},
		{"GB82WEST123456987654321", ""}, // too long
		{"XX82WEST12345698765432", ""},  // no such country
		{"03-1234-5678", "phone"},
		{"090-1234-5678", "phone"},
		{"+81 90 1234 5678", "phone"},
		{"+819012345678", "phone"},
		{"+44 20 7946 0958", "phone"},
		{"0120-123-456", "phone"},
		{"1234-5678", ""},
		{"2001:db8::1", "ip"},
		{"::1", ""},
		{"::", ""},
		{"192.168.0.1", "ip"},
		{"192.168.0.256", ""},
		{"192.168.00.1", ""},
		{"1.2.3.4.5", ""},
		{"a@b.co", "email"},
		{"a@b.c", ""},
		{"a@b", ""},
		{"x4111111111111111", ""},
		{"INV-4111111111111111", ""},
		{"4111111111111111.5", ""},
		{"09:12:34:56:78:90", ""},
	} {
		got := pii.Scan(tc.text, 0)
		var names []string
		for _, tag := range pii.AppendTags(nil, got) {
			if k, ok := strings.CutPrefix(tag, pii.TagPrefix); ok {
				names = append(names, k)
			}
		}
		if want := []string{tc.want}; !(tc.want == "" && len(names) == 0) && !slices.Equal(names, want) {
			t.Errorf("Scan(%q) = %v, want %v", tc.text, names, tc.want)
		}
	}
}

// hostile are 1 MB prompts of near-misses built to make a scanner go back
// over what it read.
func hostile() map[string]string {
	const size = 1 << 20
	rep := func(s string) string { return strings.Repeat(s, size/len(s)) }
	return map[string]string{
		"digits":          rep("1"),
		"spaced digits":   rep("1 "),
		"failing cards":   rep("4111 1111 1111 1112 "),
		"dashed groups":   rep("12-"),
		"at signs":        rep("a@"),
		"dots after at":   "a@" + rep("a."),
		"local then at":   rep("a.") + "@",
		"colons":          rep("1:"),
		"hex and colons":  rep("ab:"),
		"dotted":          rep("1."),
		"iban starts":     rep("DE89 "),
		"iban letters":    rep("DE"),
		"parentheses":     rep("(1"),
		"pluses":          rep("+1 "),
		"full-width":      rep("０３－"),
		"japanese":        rep("電話番号"),
		"near-miss mix":   rep("ORD-2024-000123 2024-01-15T12:30:45Z v1.2.3 123456789012 DE00123 "),
		"uuid":            rep("123e4567-e89b-12d3-a456-426614174000 "),
		"one long line":   rep("x"),
		"many tiny lines": rep("1\n"),
	}
}

// TestHostile: every hostile prompt is read to its end without a false
// find, and a value after it is still found. What they cost is measured
// by BenchmarkHostile (linear: 1 to 30 ms a megabyte on the reference
// machine), not timed here: a wall-clock bound fails on a loaded machine.
func TestHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for name, text := range hostile() {
		if got := pii.Scan(text, 0); got != 0 {
			t.Errorf("%s: found %v", name, pii.AppendTags(nil, got))
		}
		if got := pii.AppendTags(nil, pii.Scan(text+"\ncard 4111 1111 1111 1111", 0)); !slices.Equal(got, []string{"pii-detected", "pii:card"}) {
			t.Errorf("%s: a card after it gave %v", name, got)
		}
	}
}

func BenchmarkHostile(b *testing.B) {
	for name, text := range hostile() {
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				pii.Scan(text, 0)
			}
		})
	}
}

// benchPrompt is an 8k-token (about 32 KB) conversation in English,
// Japanese, German and French, with numbers, dates and identifiers but no
// personal data; with pii, a card number sits in its last message.
func benchPrompt(b *testing.B, withPII bool) []byte {
	paras := []string{
		"The quarterly report for 2024-Q3 shows revenue of 1,234,567 EUR, up 12.5% on Q2; see ticket INV-2024-000123 and build v2.14.0 for the numbers. ",
		"会議は2024年1月15日 10:00から第3会議室で行います。議題は新しいバージョン1.2.3のリリース計画と、注文番号ORD-2024-118842の遅延についてです。 ",
		"Die Lieferung Nr. 2024-000123 vom 15.01.2024 ist noch nicht angekommen; bitte prüfen Sie den Status im System (Version 10.0.19045). ",
		"La réunion du 15/01/2024 à 14h30 portera sur la facture F-2024-0042 et la migration vers la version 3.12.1 de Python. ",
		"```go\nfunc main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i, time.Now().Format(\"2006-01-02T15:04:05Z07:00\"))\n\t}\n}\n```\n",
	}
	var msgs []string
	var cur strings.Builder
	total := 0
	for i := 0; total < 32<<10; i++ {
		p := paras[i%len(paras)]
		cur.WriteString(p)
		total += len(p)
		if cur.Len() > 4000 {
			msgs = append(msgs, cur.String())
			cur.Reset()
		}
	}
	if withPII {
		cur.WriteString(" Meine Karte: 4111 1111 1111 1111.")
	}
	msgs = append(msgs, cur.String())
	return chatBody(b, msgs...)
}

// BenchmarkClassify is one classification of an 8k-token prompt, body
// parse included, as the router runs it:
//
//	go test -run '^$' -bench BenchmarkClassify -benchmem ./services/router/internal/classify/pii/
//
// cpu-ns/op is the benchmark thread's own CPU time per classification
// (Linux): on a machine busy with other work, ns/op counts the time the
// thread waited for a core too.
func BenchmarkClassify(b *testing.B) {
	prog := guard(b)
	c, _ := pii.New()
	for _, withPII := range []bool{false, true} {
		name := "clean"
		if withPII {
			name = "with-pii"
		}
		body := benchPrompt(b, withPII)
		b.Run(name, func(b *testing.B) {
			var req classify.Request
			tags := make([]string, 0, 8)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := classifytest.ThreadCPU()
			for b.Loop() {
				// A decision of its own, as the router's: the body is
				// parsed again.
				req.Reset()
				req.Program, req.API, req.Body = prog, chat, body
				var err error
				if tags, err = c.Classify(context.Background(), &req, tags[:0]); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := classifytest.ThreadCPU() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
			if withPII != (len(tags) > 0) {
				b.Fatalf("tags %v", tags)
			}
		})
		b.Run(name+"/scan-only", func(b *testing.B) {
			var req struct {
				Messages []struct{ Content string } `json:"messages"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu := classifytest.ThreadCPU()
			for b.Loop() {
				for _, m := range req.Messages {
					pii.Scan(m.Content, 0)
				}
			}
			if cpu := classifytest.ThreadCPU() - cpu; cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// BenchmarkScanProse is the scan of 32 KB of prose without a digit, an
// '@' or a ':' (the kind of text most of a long prompt is): what the
// eight-bytes-a-step search for those costs where there is nothing to
// check.
func BenchmarkScanProse(b *testing.B) {
	const para = "The quick brown fox jumps over the lazy dog while the river runs past the old mill, and the people of the valley gather their harvest before the first snow. "
	text := strings.Repeat(para, 32<<10/len(para))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := classifytest.ThreadCPU()
	for b.Loop() {
		pii.Scan(text, 0)
	}
	if cpu := classifytest.ThreadCPU() - cpu; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// FuzzClassify: any text is classified without a panic; the tags are the
// classifier's own names, never any of the text; and the result does not
// depend on how the text is split into messages at line breaks (lines are
// independent: that is the contract).
func FuzzClassify(f *testing.F) {
	f.Add("my card 4111 1111 1111 1111", "電話 03-1234-5678")
	f.Add("DE89 3704 0044 0532 0130 00", "2001:db8::1 and a@b.co")
	f.Add("+81 (0)90 1234 5678", "１２３４５６７８９０１８")
	f.Add("078-05-1120", "")
	f.Add("4111 1111", "1111 1111")
	allowed := pii.AppendTags(nil, 0xff)
	prog := guard(f)
	f.Fuzz(func(t *testing.T, a, b string) {
		joined := pii.Scan(a+"\n"+b, 0)
		if parts := pii.Scan(a, 0) | pii.Scan(b, 0); parts != joined {
			t.Fatalf("lines scanned apart: %b, together: %b", parts, joined)
		}
		if pii.Scan(b, pii.Scan(a, 0)) != joined {
			t.Fatal("Scan does not add to found")
		}
		one := classifyBody(t, prog, chat, chatBody(t, a+"\n"+b))
		two := classifyBody(t, prog, chat, chatBody(t, a, b))
		if !slices.Equal(one, two) {
			t.Fatalf("one message: %v, two: %v", one, two)
		}
		for _, tag := range one {
			if !slices.Contains(allowed, tag) {
				t.Fatalf("tag %q is not one of the classifier's", tag)
			}
		}
	})
}
