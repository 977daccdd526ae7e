package prompt

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-dev/switchyard/internal/tokenizer"
)

// BenchmarkReadChatHF is the router's per-request prompt cost on a real
// model (Qwen3 fixture): parse the body, render the chat template,
// tokenize. multi-turn resends a history seen on the previous turn plus one
// new exchange, as chat clients do; cold makes every message new. The body
// is rebuilt in a reused buffer each iteration (a ~35 KB copy per 8k);
// token ids go to a reused buffer, as the router reads them.
func BenchmarkReadChatHF(b *testing.B) {
	for _, k := range []int{1, 8, 32} {
		for _, mode := range []string{"cold", "multi-turn"} {
			b.Run(strconv.Itoa(k)+"k/"+mode, func(b *testing.B) {
				tok := fixtureTokenizer(b, "qwen3")
				history := benchHistory(k*1000*44/10, "")
				var body []byte
				ids := make([]uint32, 0, 1024)
				var tokens int
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					msgs := history
					if mode == "cold" {
						msgs = benchHistory(k*1000*44/10, strconv.Itoa(i)+" ")
					} else {
						msgs = append(history[:len(history):len(history)],
							[2]string{"assistant", "Noted, entry " + strconv.Itoa(i) + "."},
							[2]string{"user", "Question " + strconv.Itoa(i) + ": who signed the ledger after the storm?"})
					}
					body = appendBody(body[:0], msgs)
					p, err := Read(context.Background(), ids, chat, body, tok, Limits{})
					if err != nil {
						b.Fatal(err)
					}
					tokens, ids = p.Len(), p.Tokens
				}
				b.ReportMetric(float64(tokens), "tokens")
			})
		}
	}
}

func benchHistory(chars int, salt string) [][2]string {
	msgs := [][2]string{{"system", salt + "You keep a harbour town's archive."}}
	for i, n := 0, 0; n < chars; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		c := salt + "Turn " + strconv.Itoa(i) + ". " + strings.Repeat(tokenizer.SampleText+" ", 2)
		msgs = append(msgs, [2]string{role, c})
		n += len(c)
	}
	return msgs
}

// appendBody writes a chat body; Go quoting is JSON quoting for the
// printable ASCII used here.
func appendBody(dst []byte, msgs [][2]string) []byte {
	dst = append(dst, `{"model":"m","messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"role":`...)
		dst = strconv.AppendQuote(dst, m[0])
		dst = append(dst, `,"content":`...)
		dst = strconv.AppendQuote(dst, m[1])
		dst = append(dst, '}')
	}
	return append(dst, "]}"...)
}
