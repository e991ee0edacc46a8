package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// fetchDashboard reads /dashboard/data (loopback, no token).
func fetchDashboard(t *testing.T, a *Admin) dashboardData {
	t.Helper()
	code, body := adminRequest(t, http.MethodGet, "http://"+a.Addr().String()+"/dashboard/data", "", "", "", "")
	if code != http.StatusOK {
		t.Fatalf("/dashboard/data: %d %s", code, body)
	}
	var d dashboardData
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDashboardServes checks the page and its assets are served from the
// binary with a CSP that forbids any other origin, the data follows the
// read rules (loopback without a token, a loopback Host only), and the
// history counts the deliveries of a known workload.
func TestDashboardServes(t *testing.T) {
	c := newCluster(t, 1, 3, gossipTune)
	waitUntil(t, 10*time.Second, "a leader and every member up", func() bool {
		_, ok := c.leader(0)
		return ok && allUp(c, 0, 1, 2)
	})
	lp, _ := c.leader(0)
	a, err := ServeAdmin(c.nodes[lp], "127.0.0.1:0", AdminOptions{Token: []byte(testToken), DashboardEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	base := "http://" + a.Addr().String()

	for path, want := range map[string]string{"/dashboard/": "<title>weft dashboard</title>", "/dashboard/dashboard.js": `fetch("data"`,
		"/dashboard/dashboard.css": "svg.chart"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		buf := make([]byte, 64<<10)
		for {
			k, err := resp.Body.Read(buf)
			sb.Write(buf[:k])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(sb.String(), want) {
			t.Errorf("%s: %s, body lacks %q", path, resp.Status, want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
	}
	// No asset names another origin: everything is embedded (the SVG
	// namespace is a name, not a fetch).
	for _, f := range []string{"index.html", "dashboard.js", "dashboard.css"} {
		b, err := dashboardAssets.ReadFile("dashboard/" + f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "http://www.w3.org/2000/svg", "")
		if strings.Contains(text, "http://") || strings.Contains(text, "https://") {
			t.Errorf("%s names another origin", f)
		}
	}
	if code, body := adminRequest(t, http.MethodGet, base+"/dashboard/data", "", "", "", "attacker.example:80"); code != http.StatusForbidden {
		t.Errorf("/dashboard/data with a non-loopback Host: %d %s, want 403", code, body)
	}
	if code, body := adminRequest(t, http.MethodGet, base+"/dashboard/data", "", "Bearer wrong", "", ""); code != http.StatusUnauthorized {
		t.Errorf("/dashboard/data with a wrong token: %d %s, want 401", code, body)
	}
	if code, _ := adminRequest(t, http.MethodPost, base+"/dashboard/data", "application/json", "", "{}", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /dashboard/data: %d, want 405", code)
	}

	d0 := fetchDashboard(t, a)
	multicast(t, c.client(), 30, 3, func(int) []wire.GroupID { return []wire.GroupID{0} })
	var d dashboardData
	waitUntil(t, 10*time.Second, "the history to cover the 30 deliveries and a round trip to every peer", func() bool {
		d = fetchDashboard(t, a)
		if len(d.History) == 0 || d.History[len(d.History)-1].Delivered < d0.Self.Stats.Delivered+30 {
			return false
		}
		for _, p := range []wire.ProcID{0, 1, 2} {
			if p == lp {
				continue
			}
			seen := false
			for _, s := range d.History {
				seen = seen || s.Peers[p].RTTMs != nil
			}
			if !seen {
				return false
			}
		}
		return true
	})
	// The rates integrate to the deliveries: sum(rate x interval) over
	// the history equals the delivered count's growth.
	var integral float64
	for i := 1; i < len(d.History); i++ {
		integral += d.History[i].DeliveryRate * float64(d.History[i].T-d.History[i-1].T) / 1000
	}
	grew := float64(d.History[len(d.History)-1].Delivered - d.History[0].Delivered)
	// Each rate is over the exact time between two samples, while T is
	// in whole milliseconds: an interval of at least 45 ms (9/10 of
	// EveryMs) with k deliveries is off by less than k/45, so the whole
	// history by less than grew/45 (0.67 for 30 deliveries in one
	// interval, as when a follower gets a batch of held DELIVERs at once).
	if diff, tol := integral-grew, grew/45+0.01; diff > tol || diff < -tol {
		t.Errorf("the delivery rates integrate to %.2f, the count grew by %.0f", integral, grew)
	}
	if len(d.Members) != 3 || d.Capacity != dashboardSamples || d.EveryMs != 50 || d.ClockSkew == nil || len(d.ClockSkew) != 0 || d.SeedList == nil || len(d.SeedList) != 0 {
		t.Errorf("data: %d members, capacity %d, every %d ms, skew %v, seeds %v", len(d.Members), d.Capacity, d.EveryMs, d.ClockSkew, d.SeedList)
	}
}

// TestDashboardHistoryBound drives the history past its capacity: it
// keeps the newest samples, oldest first, and never samples twice within
// an interval.
func TestDashboardHistoryBound(t *testing.T) {
	c := newCluster(t, 1, 1, nil)
	h := newDashHistory(c.nodes[0], time.Second, 5)
	t0 := time.Unix(1000, 0)
	for i := range 12 {
		h.sample(t0.Add(time.Duration(i)*time.Second), nil)
		h.sample(t0.Add(time.Duration(i)*time.Second+500*time.Millisecond), nil) // within the interval: skipped
	}
	d := h.data(t0.Add(11*time.Second + 600*time.Millisecond)) // within the interval: no sample
	if len(d.History) != 5 {
		t.Fatalf("history holds %d samples, want the capacity 5", len(d.History))
	}
	for i, s := range d.History {
		if want := t0.Add(time.Duration(7+i) * time.Second).UnixMilli(); s.T != want {
			t.Errorf("sample %d at %d, want %d (the newest five, oldest first)", i, s.T, want)
		}
	}
}

// BenchmarkDashboardSample measures one history sample (the sampler takes
// one a second while the admin endpoint serves): status, gossip view,
// histogram reads.
func BenchmarkDashboardSample(b *testing.B) {
	n := newBenchNode(b)
	h := newDashHistory(n, time.Nanosecond, dashboardSamples)
	t0 := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.sample(t0.Add(time.Duration(i)*time.Millisecond), n.Members())
	}
}
