package amcast

import "github.com/weft-dev/weft/wire"

// CheckMulticastSender is the rule every protocol applies to a MULTICAST
// before it looks at the message (after m.Validate):
//
//   - A client may only submit messages whose id names it. The driver sets
//     Envelope.From to the identity the transport authenticated for the
//     connection, so a client that forges another client's id is refused
//     here: it can neither have its payload ordered in place of the genuine
//     one nor make the genuine client be answered "delivered" for it.
//   - A replica may re-multicast (wbcast H12; the baselines' forwarding)
//     only a message addressed to its own group: it holds the message
//     because a leader of a destination group proposed it.
//
// Refusals are counted in r under "client_mismatch" and
// "foreign_remulticast".
func CheckMulticastSender(topo *Topology, r *Rejects, from wire.ProcID, m *wire.AppMsg) error {
	if g, ok := topo.GroupOf(from); ok {
		if m.DestIndex(g) < 0 {
			return r.Reject("foreign_remulticast", "replica p%d of group %d re-multicast %s, which is not addressed to its group", from, g, m.ID)
		}
		return nil
	}
	if m.ID.Client != from {
		return r.Reject("client_mismatch", "process %d multicast %s, a message of client %d", from, m.ID, m.ID.Client)
	}
	return nil
}
