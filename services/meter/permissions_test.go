package meter

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-dev/switchyard/internal/bus"
	"github.com/switchyard-dev/switchyard/internal/testkit"
)

// natsServerBin is Debian's nats-server, which .ci/run installs.
const natsServerBin = "/usr/sbin/nats-server"

// The tenant feeds under deploy/nats/tenant-feeds.conf's users, on a real
// nats-server: team A's credentials subscribe to team A's requests and
// summaries, and the server refuses them team B's subtree, the raw usage
// stream and any wildcard spanning tenants; team A may publish nothing.
func TestTenantFeedPermissions(t *testing.T) {
	if _, err := os.Stat(natsServerBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (CI=true requires it)", natsServerBin, err)
		}
		t.Skipf("SKIPPED: needs %s (Debian's nats-server): %v", natsServerBin, err)
	}
	dir := t.TempDir()
	users, err := os.ReadFile("../../deploy/nats/tenant-feeds.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tenant-feeds.conf"), users, 0o600); err != nil {
		t.Fatal(err)
	}
	port := testkit.FreePort(t)
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\njetstream { store_dir: %q }\ninclude ./tenant-feeds.conf\n", port, filepath.Join(dir, "js"))
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{"switchyard": "sw-pass", "team-a": "a-pass", "team-b": "b-pass"}
	cmd := exec.Command(natsServerBin, "-c", filepath.Join(dir, "nats.conf"))
	cmd.Env = append(os.Environ(), "SWITCHYARD_NATS_PASSWORD="+pw["switchyard"], "TEAM_A_NATS_PASSWORD="+pw["team-a"], "TEAM_B_NATS_PASSWORD="+pw["team-b"])
	testkit.Process(t, "nats-server", cmd)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	connect := func(user string, errs *[]string, mu *sync.Mutex) *nats.Conn {
		t.Helper()
		var nc *nats.Conn
		testkit.Eventually(t, 10*time.Second, "nats-server up for "+user, func() bool {
			var err error
			nc, err = nats.Connect(url, nats.UserInfo(user, pw[user]), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				if errs != nil {
					mu.Lock()
					*errs = append(*errs, err.Error())
					mu.Unlock()
				}
			}))
			return err == nil
		})
		t.Cleanup(nc.Close)
		return nc
	}

	// Switchyard's services: events on the stream, the meter on them.
	e := newEnv(t)
	e.nc = connect("switchyard", nil, nil)
	if e.js, err = jetstream.New(e.nc); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.EnsureUsageStream(ctx, e.js); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.NATS.URL = "nats://switchyard:" + pw["switchyard"] + "@127.0.0.1:" + strconv.Itoa(port)
	e.start(cfg, nil)

	var mu sync.Mutex
	var refused []string
	teamA := connect("team-a", &refused, &mu)
	own := make(chan *nats.Msg, 16)
	if _, err := teamA.ChanSubscribe(bus.TenantSubjects("team-a"), own); err != nil {
		t.Fatal(err)
	}
	stolen := make(chan *nats.Msg, 16)
	for _, subj := range []string{bus.TenantSubjects("team-b"), bus.UsageSubjectAll, "switchyard.v1.tenant.>", ">"} {
		if _, err := teamA.ChanSubscribe(subj, stolen); err != nil {
			t.Fatal(err)
		}
	}
	if err := teamA.Publish(bus.TenantUsageSubject("team-a", "qwen"), []byte(`{"forged":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := teamA.Flush(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the server refusing team A four subscriptions and a publish", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) >= 5
	})
	mu.Lock()
	for _, r := range refused {
		if !strings.Contains(strings.ToLower(r), "permissions violation") {
			t.Errorf("team A's error %q is not a permissions violation", r)
		}
	}
	mu.Unlock()

	for i, tenant := range []string{"team-a", "team-b", "team-a"} {
		ev := usageEvent(fmt.Sprintf("p-%d", i), tenant, "qwen", bus.UsageOutcomeOK, time.Duration(i)*time.Second)
		e.publish(ev, ev.GetRequestId())
	}
	got := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case msg := <-own:
			var u bus.TenantUsage
			if err := json.Unmarshal(msg.Data, &u); err != nil || u.Tenant != "team-a" {
				t.Fatalf("team A received %s: %s (%v)", msg.Subject, msg.Data, err)
			}
			got[u.RequestID] = true
		case msg := <-stolen:
			t.Fatalf("a refused subscription received %s: %s", msg.Subject, msg.Data)
		case <-deadline:
			t.Fatalf("team A received %d of its 2 requests", len(got))
		}
	}
	select {
	case msg := <-stolen:
		t.Fatalf("a refused subscription received %s", msg.Subject)
	case msg := <-own:
		t.Fatalf("team A received more: %s %s", msg.Subject, msg.Data)
	case <-time.After(300 * time.Millisecond):
	}
}
