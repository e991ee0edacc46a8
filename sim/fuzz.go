package sim

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/weft-dev/weft/internal/check"
	"github.com/weft-dev/weft/wire"
)

// Fuzzing a replica with hostile input (issue #10 item 1): FuzzReplica is
// the body of the protocols' FuzzStep targets.
//
// A short run (2 groups of 3 replicas, 1 for Skeen; 2 clients; 30 closed-
// loop multicasts; delays uniform in (0, δ]) brings one replica X, drawn
// from the seed, into a varied state; at a time drawn from the seed (1δ to
// 30δ) the messages decoded from data are handed to X, each from a sender
// drawn from data, and the run goes on to its end.
//
// data is a sequence of [sender byte][length: 2 bytes, big endian][length
// bytes of one wire-encoded message]; what does not decode is skipped. The
// sender byte picks, modulo the choices, a replica (X itself included), a
// client of the run, or one of two processes outside the run.
//
// X must never panic. When every sender was a stranger (a process outside
// the run, as an unauthenticated peer or unknown client would be), the run must also refuse no genuine
// message and its history must pass the checkers (validity, integrity,
// order, gts agreement and, except for Skeen, termination at every replica
// X included); messages the strangers managed to multicast are left out of
// the history first (nobody in the workload multicast them). Input forged
// in the name of a correct replica or client is outside the fault model
// (replicas and clients are authenticated): then only the absence of panics
// is required, and X's outputs are dropped from the injection on (Mute).
func FuzzReplica(protocol string, seed uint64, data []byte) error {
	replicas := 3
	if protocol == "skeen" {
		replicas = 1
	}
	const groups, clients = 2, 2
	nrep := groups * replicas
	x := wire.ProcID(seed % uint64(nrep))
	delta := int64(1000)
	at := (1 + int64(seed/uint64(nrep))%30) * delta
	strangers := []wire.ProcID{wire.ProcID(nrep + clients + 1), 1 << 30}
	senders := nrep + clients + len(strangers)

	var envs []wire.Envelope
	forged := false // some input claims to come from a replica or client of the run
	for len(data) >= 3 {
		sel := int(data[0]) % senders
		n := int(binary.BigEndian.Uint16(data[1:3]))
		data = data[3:]
		n = min(n, len(data))
		body := data[:n]
		data = data[n:]
		m, err := wire.Decode(body)
		if err != nil {
			continue
		}
		from := wire.ProcID(sel)
		if sel >= nrep+clients {
			from = strangers[sel-nrep-clients]
		} else {
			forged = true
		}
		envs = append(envs, wire.Envelope{From: from, To: x, Msg: m})
	}
	injected, muted := false, false
	cfg := Config{
		Protocol: protocol,
		Groups:   groups,
		Replicas: replicas,
		Seed:     seed,
		Delta:    delta,
		Delay:    DelayUniform,
		Workload: Workload{Messages: 30, Clients: clients},
		MaxTime:  400 * delta,
		Inject: func(now int64) []wire.Envelope {
			if injected || now < at {
				return nil
			}
			injected, muted = true, forged
			return envs
		},
		Mute: func(p wire.ProcID) bool { return muted && p == x },
	}
	res, err := Run(cfg)
	if err != nil && strings.Contains(err.Error(), "panic") {
		return fmt.Errorf("protocol %s seed %d: replica p%d: %w", protocol, seed, x, err)
	}
	if forged {
		return nil
	}
	if err != nil {
		return fmt.Errorf("protocol %s seed %d (p%d fed %d messages from strangers): %w", protocol, seed, x, len(envs), err)
	}
	term := check.TermAll
	if protocol == "skeen" {
		// Skeen tolerates no faulty client: a stranger's multicast that
		// reached only X blocks X's later deliveries for good.
		term = check.TermNone
	}
	if rep := check.Check(workloadOnly(res.History), check.Options{Termination: term}); !rep.OK() {
		return fmt.Errorf("protocol %s seed %d (p%d fed %d messages from strangers at t=%d): %s", protocol, seed, x, len(envs), at, rep.Error())
	}
	return nil
}

// workloadOnly returns h without the deliveries of messages that were not
// multicast in it.
func workloadOnly(h *check.History) *check.History {
	out := &check.History{Config: h.Config}
	ids := map[string]bool{}
	for _, ev := range h.Events {
		if ev.Ev == "multicast" {
			ids[ev.ID] = true
		}
		if ev.Ev != "deliver" || ids[ev.ID] {
			out.Events = append(out.Events, ev)
		}
	}
	return out
}

// FuzzInput encodes envelopes as FuzzReplica's data (seed corpora): each
// message from the sender whose index FuzzReplica's sender byte selects.
func FuzzInput(msgs ...FuzzMsg) []byte {
	var b []byte
	for _, m := range msgs {
		body := wire.Append(nil, m.Msg)
		b = append(b, m.Sender)
		b = binary.BigEndian.AppendUint16(b, uint16(len(body)))
		b = append(b, body...)
	}
	return b
}

// FuzzMsg is one message of a FuzzInput and its sender byte.
type FuzzMsg struct {
	Sender byte
	Msg    wire.Message
}
