package sim

import (
	"fmt"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/amcast/fastcast"
	"github.com/weft-dev/weft/amcast/ftskeen"
	"github.com/weft-dev/weft/amcast/skeen"
	"github.com/weft-dev/weft/amcast/wbcast"
	"github.com/weft-dev/weft/wire"
)

// ProtocolSpec describes a protocol the simulator can run: how to build a
// replica and, for crash-tolerant protocols, how to keep its durable state
// and rebuild it after a crash.
type ProtocolSpec struct {
	// Name is the protocol's name (Config.Protocol, the history's config).
	Name string
	// New builds replica id in its initial state.
	New func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error)
	// NewStore returns an empty durable store for one replica. nil means
	// the protocol is not crash tolerant: runs of it cannot crash replicas.
	NewStore func() amcast.Store
	// Restore rebuilds replica id after a crash from the store NewStore
	// returned, to which the simulator applied every record the replica
	// persisted before it crashed.
	Restore func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error)
	// Amnesiac rebuilds replica id after its store was lost (FaultDiskLoss);
	// st holds what it persisted since.
	// nil: the protocol has no amnesia handling and runs without disk loss.
	Amnesiac func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error)
	// CompareRestored, when set, compares a live replica with one Restore
	// rebuilt from what the live one persisted so far, on the durable state
	// (Config.CheckRestore); nil means the protocol defines no comparison.
	CompareRestored func(live, restored amcast.Machine) error
	// CompareImage, when set, compares the durable image a live replica
	// keeps itself (what a node compacts its log to; wbcast.Image) with the
	// store its records built, after every Ready (Config.CheckRestore).
	CompareImage func(topo *amcast.Topology, live amcast.Machine, st amcast.Store) error
	// HandsOver: the protocol's machines implement amcast.HandOverer
	// (FaultHandOver).
	HandsOver bool
	// SendsBeforeSync, if set, names the messages a node sends before its
	// Ready's records are durable (wbcast.SendsBeforeSync): a torn crash
	// lets them leave (FaultTornCrash), as a node crashing during its
	// sync would have sent them.
	SendsBeforeSync func(wire.Message) bool
	// MayWait, if set, names the messages a replica may hold for its next
	// message to the same peer (wbcast.MayWait; Config.Hold).
	MayWait func(wire.Message) bool
}

// CrashTolerant reports whether replicas of the protocol can crash and
// restart (NewStore and Restore are set).
func (ps *ProtocolSpec) CrashTolerant() bool { return ps.NewStore != nil && ps.Restore != nil }

// protocolSpecs is the table of protocols the simulator runs, by name.
var protocolSpecs = []*ProtocolSpec{
	{
		Name: "skeen",
		New: func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
			return machine(skeen.New(topo, id))
		},
	},
	wbcastSpec(nil),
	ftskeenSpec,
	fastcastSpec,
}

// wbcastSpec runs WbCast; tune, if not nil, changes every replica's
// configuration (tests run variants of the protocol with it).
// WbCastSpec is WbCast with its configuration adjusted by tune (nil: the
// defaults), for Config.Spec.
func WbCastSpec(tune func(*wbcast.Config)) *ProtocolSpec { return wbcastSpec(tune) }

func wbcastSpec(tune func(*wbcast.Config)) *ProtocolSpec {
	config := func(topo *amcast.Topology, id wire.ProcID) wbcast.Config {
		cfg := wbcast.Config{Topology: topo, ID: id}
		if tune != nil {
			tune(&cfg)
		}
		return cfg
	}
	return &ProtocolSpec{
		Name:            "wbcast",
		HandsOver:       true,
		SendsBeforeSync: wbcast.SendsBeforeSync,
		MayWait:         wbcast.MayWait,
		New: func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
			return machine(wbcast.New(config(topo, id)))
		},
		NewStore: func() amcast.Store { return wbcast.NewStore() },
		Restore: func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
			ws, ok := st.(*wbcast.Store)
			if !ok {
				return nil, fmt.Errorf("sim: wbcast cannot restore from a %T", st)
			}
			return machine(wbcast.Restore(config(topo, id), ws))
		},
		Amnesiac: func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
			ws, ok := st.(*wbcast.Store)
			if !ok {
				return nil, fmt.Errorf("sim: wbcast cannot restore from a %T", st)
			}
			return machine(wbcast.RestoreAmnesiac(config(topo, id), ws))
		},
		CompareRestored: func(live, restored amcast.Machine) error {
			l, ok1 := live.(*wbcast.Process)
			r, ok2 := restored.(*wbcast.Process)
			if !ok1 || !ok2 {
				return fmt.Errorf("sim: wbcast cannot compare a %T with a %T", live, restored)
			}
			return wbcast.CompareRestored(l, r)
		},
		CompareImage: func(topo *amcast.Topology, live amcast.Machine, st amcast.Store) error {
			l, ok1 := live.(*wbcast.Process)
			s, ok2 := st.(*wbcast.Store)
			if !ok1 || !ok2 {
				return fmt.Errorf("sim: wbcast cannot compare the image of a %T with a %T", live, st)
			}
			img, ok := l.Image()
			if !ok {
				return nil // inert after a disk loss: no image
			}
			g, _ := topo.GroupOf(l.ID())
			return wbcast.CompareImage(topo, g, img, s)
		},
	}
}

// ftskeenSpec runs FT-Skeen (Skeen's process replicated per group by
// Multi-Paxos) with its default configuration.
var ftskeenSpec = &ProtocolSpec{
	Name: "ftskeen",
	New: func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
		return machine(ftskeen.New(ftskeen.Config{Topology: topo, ID: id}))
	},
	NewStore: func() amcast.Store { return ftskeen.NewStore() },
	Restore: func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
		rs, ok := st.(*ftskeen.Store)
		if !ok {
			return nil, fmt.Errorf("sim: ftskeen cannot restore from a %T", st)
		}
		return machine(ftskeen.Restore(ftskeen.Config{Topology: topo, ID: id}, rs))
	},
}

// fastcastSpec runs FastCast (speculative soft timestamps over the same
// per-group Multi-Paxos) with its default configuration.
var fastcastSpec = &ProtocolSpec{
	Name: "fastcast",
	New: func(topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
		return machine(fastcast.New(fastcast.Config{Topology: topo, ID: id}))
	},
	NewStore: func() amcast.Store { return fastcast.NewStore() },
	Restore: func(topo *amcast.Topology, id wire.ProcID, st amcast.Store) (amcast.Machine, error) {
		fs, ok := st.(*fastcast.Store)
		if !ok {
			return nil, fmt.Errorf("sim: fastcast cannot restore from a %T", st)
		}
		return machine(fastcast.Restore(fastcast.Config{Topology: topo, ID: id}, fs))
	},
}

// machine turns a constructor's (*T, error) into (amcast.Machine, error)
// without a typed nil on error.
func machine[T amcast.Machine](m T, err error) (amcast.Machine, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Protocols lists the protocols the simulator can run.
var Protocols = func() []string {
	var names []string
	for _, ps := range protocolSpecs {
		names = append(names, ps.Name)
	}
	return names
}()

// LookupProtocol returns the spec of the named protocol.
func LookupProtocol(name string) (*ProtocolSpec, error) {
	for _, ps := range protocolSpecs {
		if ps.Name == name {
			return ps, nil
		}
	}
	return nil, fmt.Errorf("sim: unknown protocol %q (want one of %v)", name, Protocols)
}

// NewReplica builds a replica of the named protocol.
func NewReplica(protocol string, topo *amcast.Topology, id wire.ProcID) (amcast.Machine, error) {
	ps, err := LookupProtocol(protocol)
	if err != nil {
		return nil, err
	}
	return ps.New(topo, id)
}
