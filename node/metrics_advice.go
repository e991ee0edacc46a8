package node

// Metrics of the gossip seed's advice (gossip_advice.go): seed-list
// consistency and clock offsets. Collected by nodeCollector with the
// other gossip metrics, from the members view it reads on the loop.

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weft-dev/weft/membership"
)

var (
	descSeedMis   = desc("weft_gossip_seed_list_mismatch", "1 if the member's seed list differs from the majority's among the live members (every list when none has a majority), else 0; this node and the live members that publish a digest.", "member")
	descSeedDiff  = desc("weft_gossip_seed_list_differing_members", "Live members (this node included) whose seed list differs from the majority's.")
	descSeedFor   = desc("weft_gossip_seeds_foreign", "Configured seeds seen answering for another cluster.")
	descClockOff  = desc("weft_gossip_clock_offset_seconds", "A peer's clock minus this node's, estimated NTP-style from gossip exchanges (smoothed).", "peer")
	descClockRTT  = desc("weft_gossip_clock_delay_seconds", "The smoothed round trip of the exchanges the offset comes from: the offset is within ± half of it.", "peer")
	descClockSkw  = desc("weft_gossip_clock_skewed_peers", "Peers whose clock offset is beyond gossip.clock_skew_threshold.")
	descClockTh   = desc("weft_gossip_clock_skew_threshold_seconds", "gossip.clock_skew_threshold.")
	descClockSmp  = desc("weft_gossip_clock_samples_total", "Clock offset samples taken from gossip exchanges.")
	descClockUnus = desc("weft_gossip_clock_samples_unused_total", "Clock samples not used for the offset, by reason (unmatched: stamps echo another exchange; negative_delay: inconsistent stamps; spike: round trip too long).", "reason")
	descGenAhead  = desc("weft_gossip_generations_ahead_total", "Peer generations seen more than the clock skew threshold ahead of this node's clock.")
)

var adviceDescs = []*prometheus.Desc{descSeedMis, descSeedDiff, descSeedFor, descClockOff, descClockRTT, descClockSkw,
	descClockTh, descClockSmp, descClockUnus, descGenAhead}

// collectAdvice emits the advice metrics from the gossip counters, the
// members view and the advice report.
func collectAdvice(g *membership.Stats, th float64, members []Member, adv *adviceReport, gauge, counter func(*prometheus.Desc, float64, ...string)) {
	if g != nil {
		counter(descClockSmp, float64(g.ClockSamples))
		counter(descClockUnus, float64(g.ClockUnmatched), "unmatched")
		counter(descClockUnus, float64(g.ClockNegative), "negative_delay")
		counter(descClockUnus, float64(g.ClockSpikes), "spike")
		counter(descGenAhead, float64(g.GenerationsAhead))
		gauge(descClockTh, th)
	}
	differ, skewed := 0, 0
	for _, m := range members {
		if m.SeedDigest != "" && (m.Self || m.Status == MemberUp) {
			gauge(descSeedMis, b2f(m.SeedMismatch), peerLabel(m.ID))
			if m.SeedMismatch {
				differ++
			}
		}
		if m.ClockOffsetSeconds != nil && !m.Self {
			gauge(descClockOff, *m.ClockOffsetSeconds, peerLabel(m.ID))
			gauge(descClockRTT, m.ClockDelaySeconds, peerLabel(m.ID))
			if m.ClockSkewed {
				skewed++
			}
		}
	}
	if adv != nil {
		gauge(descSeedDiff, float64(differ))
		gauge(descClockSkw, float64(skewed))
		gauge(descSeedFor, float64(adv.Foreign))
	}
}
