package registry

import (
	"strings"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[func() int]("widget")
	r.Register("one", func() int { return 1 })
	r.Register("two", func() int { return 2 })

	if f, err := r.Lookup("two"); err != nil || f() != 2 {
		t.Fatalf("Lookup(two): %v", err)
	}
	if _, err := r.Lookup("three"); err == nil || err.Error() != `unknown widget "three": want one of one, two` {
		t.Fatalf("Lookup(three): %v", err)
	}
	if got := strings.Join(r.Names(), ","); got != "one,two" {
		t.Fatalf("Names = %s", got)
	}

	tests := []struct {
		list, want, wantErr string
	}{
		{list: "", want: ""},
		{list: " two , one ", want: "two=2 one=1"},
		{list: "one,,two,", want: "one=1 two=2"},
		{list: "one,three,one,four", wantErr: `unknown widget "three": want one of one, two; widget "one" listed twice; unknown widget "four": want one of one, two`},
	}
	for _, tt := range tests {
		got, err := r.List(tt.list)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("List(%q) error %v, want %q", tt.list, err, tt.wantErr)
			}
			continue
		}
		var parts []string
		for _, e := range got {
			parts = append(parts, e.Name+"="+string(rune('0'+e.New())))
		}
		if err != nil || strings.Join(parts, " ") != tt.want {
			t.Errorf("List(%q) = %v, %v; want %s", tt.list, parts, err, tt.want)
		}
	}
}

func TestRegisterRefusesBadNames(t *testing.T) {
	r := New[int]("widget")
	r.Register("a", 1)
	for _, name := range []string{"a", "", " b", "b,c"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			r.Register(name, 2)
		}()
	}
}
