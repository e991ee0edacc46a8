package node

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/weft-dev/weft/wire"
)

// pageView is what the browser test reads back from the rendered page:
// the DOM's numbers, and the data the page drew them from.
type pageView struct {
	Renders int `json:"renders"`
	Members []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Role   string `json:"role"`
		Group  string `json:"group"`
		Seed   string `json:"seed"`
	} `json:"members"`
	Summary string `json:"summary"`
	Groups  []struct {
		Group, Leader, Ballot string
	} `json:"groups"`
	Peers []struct {
		Peer      string `json:"peer"`
		Status    string `json:"status"`
		Samples   string `json:"samples"` // the round-trip graph's points
		Last      string `json:"last"`
		Polylines int    `json:"polylines"`
		Up        string `json:"up"`   // the up/down strip's green bars
		Down      string `json:"down"` // and red ones
		Flaps     string `json:"flaps"`
	} `json:"peers"`
	Delivered          string        `json:"delivered"`
	ThroughputSamples  string        `json:"throughput_samples"`
	ThroughputPolyline int           `json:"throughput_polylines"`
	ThroughputMax      string        `json:"throughput_max"`
	LatencyMax         string        `json:"latency_max"`
	LatencySamples     string        `json:"latency_samples"`
	Warnings           []string      `json:"warnings"`
	Data               dashboardData `json:"data"`
}

// readPage is evaluated in the page: it collects the rendered DOM and the
// data behind it in one turn of the page's event loop (consistent).
const readPage = `(() => {
  const q = s => document.querySelector(s), qa = (s, r) => [...(r || document).querySelectorAll(s)];
  const w = window.weftDashboard;
  if (!w) return null;
  return {
    renders: w.renders,
    members: qa("#members tbody tr").map(tr => ({ id: tr.dataset.id, status: tr.cells[5].textContent,
      role: tr.cells[3].textContent, group: tr.cells[2].textContent, seed: tr.querySelector(".seed").textContent })),
    summary: q("#members-summary").textContent,
    groups: qa("#groups tbody tr").map(tr => ({ Group: tr.cells[0].textContent, Leader: tr.cells[1].textContent, Ballot: tr.cells[2].textContent })),
    peers: qa("#peers tbody tr").map(tr => {
      const g = tr.querySelector("svg.rtt-graph"), s = tr.querySelector("svg.updown");
      return { peer: tr.dataset.peer, status: tr.cells[1].textContent, samples: g.dataset.samples, last: g.dataset.last,
        polylines: qa("polyline", g).length, up: s.dataset.up, down: s.dataset.down, flaps: tr.querySelector(".flaps").textContent };
    }),
    delivered: q("#delivered").textContent,
    throughput_samples: q("#throughput").dataset.samples,
    throughput_polylines: qa("#throughput polyline").length,
    throughput_max: q("#throughput").dataset.max,
    latency_samples: q("#latency").dataset.samples,
    latency_max: q("#latency").dataset.max,
    warnings: qa("#warnings li").map(li => li.textContent),
    data: w.data,
  };
})()`

// TestDashboardInBrowser loads the dashboard in Debian's headless
// chromium from a running 2 x 3 cluster, checks that the members table,
// the groups and the graphs show the cluster's own numbers, stops a node
// and watches it turn DOWN on the page, and saves a screenshot (logged;
// WEFT_DASHBOARD_SCREENSHOT=path also copies it there, e.g.
// ../docs/dashboard.png). Skipped without chromium
// (scripts/install-chromium.sh installs it).
func TestDashboardInBrowser(t *testing.T) {
	bin := findChromium()
	if bin == "" {
		t.Skip("no chromium on PATH (nor $WEFT_CHROMIUM): run scripts/install-chromium.sh (Debian: apt-get install chromium) to run the dashboard's browser test")
	}
	tStart := time.Now()
	c := newCluster(t, 2, 3, gossipTune)
	all := []wire.ProcID{0, 1, 2, 3, 4, 5}
	waitUntil(t, 15*time.Second, "leaders in both groups and every member up at p0", func() bool {
		_, ok0 := c.leader(0)
		_, ok1 := c.leader(1)
		return ok0 && ok1 && allUp(c, 0, 1, 2, 3, 4, 5)
	})
	a, err := ServeAdmin(c.nodes[0], "127.0.0.1:0", AdminOptions{DashboardEvery: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	br := startBrowser(t, bin)

	const sent = 25
	multicast(t, c.client(), sent, 5, func(int) []wire.GroupID { return []wire.GroupID{0, 1} })
	waitUntil(t, 10*time.Second, "p0 to deliver the workload", func() bool { return c.nodes[0].Status().Stats.Delivered == sent })

	tWork := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "http://" + a.Addr().String() + "/dashboard/?every=200"
	if err := br.page.call(ctx, "Page.navigate", map[string]any{"url": url}, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard at %s", url)
	read := func() pageView {
		t.Helper()
		var v *pageView
		if err := br.page.eval(ctx, readPage, &v); err != nil {
			t.Fatal(err)
		}
		if v == nil {
			return pageView{}
		}
		return *v
	}
	var v pageView
	waitUntil(t, 20*time.Second, "the page to draw every member and a round trip to every peer", func() bool {
		v = read()
		if len(v.Members) != len(all) || len(v.Peers) != len(all)-1 {
			return false
		}
		for _, p := range v.Peers {
			if n, _ := strconv.Atoi(p.Samples); n < 2 || p.Status != MemberUp {
				return false
			}
		}
		for _, m := range v.Members {
			if m.Status != MemberUp {
				return false
			}
		}
		return true
	})

	tDrawn := time.Now()

	// The members table: every configured member, UP, in its group, with
	// the leaders the nodes themselves report.
	leaders := map[string]string{}
	for g := range 2 {
		lp, _ := c.leader(wire.GroupID(g))
		leaders[strconv.Itoa(g)] = "p" + strconv.Itoa(int(lp))
	}
	for i, m := range v.Members {
		p := all[i]
		g, _ := c.topo.GroupOf(p)
		if m.ID != strconv.Itoa(int(p)) || m.Status != MemberUp || m.Group != strconv.Itoa(int(g)) {
			t.Errorf("members row %d: %+v, want p%d UP in g%d", i, m, p, g)
		}
		// The role gossip reports (lower case) for the node leaders()
		// found leading its group.
		if want := memberStatus(c.nodes[0], p).Role; m.Role != want || (want == "leader") != (leaders[m.Group] == "p"+m.ID) {
			t.Errorf("members row p%s: role %s, gossip says %s, the group's leader is %s", m.ID, m.Role, want, leaders[m.Group])
		}
	}
	if v.Summary != "6 of 6 up" {
		t.Errorf("members summary %q, want 6 of 6 up", v.Summary)
	}
	if len(v.Groups) != 2 || v.Groups[0].Leader != leaders["0"] || v.Groups[1].Leader != leaders["1"] {
		t.Errorf("groups %+v, want leaders %v", v.Groups, leaders)
	}
	// The graphs: each peer's round-trip graph has one point per measured
	// interval of the data the page holds, its label the last of them;
	// the up/down strip one green bar per UP sample, one red per DOWN.
	for _, p := range v.Peers {
		id, _ := strconv.Atoi(p.Peer)
		points, last, up, down, flaps := 0, "", 0, 0, uint64(0)
		for _, s := range v.Data.History {
			pt, ok := s.Peers[wire.ProcID(id)]
			if !ok {
				continue
			}
			if pt.RTTMs != nil {
				points++
				last = fmt.Sprintf("%.3f", *pt.RTTMs)
			}
			switch pt.Status {
			case MemberUp:
				up++
			case MemberDown, MemberRemoved:
				down++
			}
			flaps = pt.Flaps
		}
		if p.Samples != strconv.Itoa(points) || p.Last != last || p.Polylines == 0 {
			t.Errorf("peer p%s: graph of %s points (last %s, %d lines), the data has %d (last %s)", p.Peer, p.Samples, p.Last, p.Polylines, points, last)
		}
		// Under CPU contention the tests' fast gossip may convict a live
		// peer for a moment: the strip must show exactly what the data
		// says, whatever it is.
		if p.Up != strconv.Itoa(up) || p.Down != strconv.Itoa(down) || up == 0 || p.Flaps != strconv.FormatUint(flaps, 10) {
			t.Errorf("peer p%s: strip %s up / %s down, %s flaps; the data has %d / %d, %d flaps", p.Peer, p.Up, p.Down, p.Flaps, up, down, flaps)
		}
	}
	if v.Delivered != strconv.Itoa(sent) {
		t.Errorf("the page shows %s delivered, p0 delivered %d", v.Delivered, sent)
	}
	if n, _ := strconv.Atoi(v.ThroughputSamples); n != len(v.Data.History) || v.ThroughputPolyline == 0 {
		t.Errorf("throughput graph: %s points in %d lines, the history has %d samples", v.ThroughputSamples, v.ThroughputPolyline, len(v.Data.History))
	}
	// The throughput and latency graphs peak where the data does, and the
	// latency graph has a point per interval that delivered a message
	// a client sent to p0.
	var maxRate, maxLat float64
	lats := 0
	for _, s := range v.Data.History {
		maxRate = max(maxRate, s.DeliveryRate)
		if s.LatencyMs != nil {
			lats++
			maxLat = max(maxLat, *s.LatencyMs)
		}
	}
	if v.ThroughputMax != fmt.Sprintf("%.3f", maxRate) || maxRate == 0 || v.LatencyMax != fmt.Sprintf("%.3f", maxLat) || v.LatencySamples != strconv.Itoa(lats) {
		t.Errorf("graphs: throughput max %s, latency max %s over %s points; the data: %.3f, %.3f over %d", v.ThroughputMax, v.LatencyMax, v.LatencySamples, maxRate, maxLat, lats)
	}
	// One clock, one configuration: gossip measured and found nothing.
	if len(v.Warnings) < 2 || v.Warnings[0] != "clock skew: no warning" || v.Warnings[1] != "seed list: no warning" {
		t.Errorf("warnings %q", v.Warnings)
	}
	for _, m := range v.Members {
		if m.Seed != "ok" {
			t.Errorf("member %s: seed list column %q", m.ID, m.Seed)
		}
	}

	// Stop a follower of group 1: gossip convicts it and the page shows it
	// DOWN, red on its strip, one of six members fewer up.
	victim := wire.ProcID(5)
	if lp, _ := c.leader(1); lp == victim {
		victim = 4
	}
	c.stop(victim)
	stopped := time.Now()
	waitUntil(t, 20*time.Second, fmt.Sprintf("the page to show p%d DOWN", victim), func() bool {
		v = read()
		for _, m := range v.Members {
			if m.ID == strconv.Itoa(int(victim)) && m.Status == MemberDown {
				for _, p := range v.Peers {
					if p.Peer == m.ID {
						return p.Down != "0" && p.Status == MemberDown
					}
				}
			}
		}
		return false
	})
	t.Logf("p%d shown DOWN on the page %v after it stopped", victim, time.Since(stopped).Round(10*time.Millisecond))
	if v.Summary != "5 of 6 up" {
		t.Errorf("members summary %q after the stop, want 5 of 6 up", v.Summary)
	}
	// Let the strip show a little of the red before the picture.
	time.Sleep(600 * time.Millisecond)

	shot, err := br.page.screenshot(ctx)
	t.Logf("times: cluster up and workload %v, browser at the page's first full draw %v", tWork.Sub(tStart).Round(time.Millisecond), tDrawn.Sub(tWork).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("screenshot is %v", b)
	}
	path := filepath.Join(t.TempDir(), "dashboard.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot (%d bytes, %v): %s", len(shot), img.Bounds().Size(), path)
	if dst := os.Getenv("WEFT_DASHBOARD_SCREENSHOT"); dst != "" {
		if err := os.WriteFile(dst, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot copied to %s", dst)
	}
}
