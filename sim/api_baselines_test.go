package sim

import (
	"reflect"
	"testing"

	"github.com/weft-dev/weft/amcast/fastcast"
	"github.com/weft-dev/weft/amcast/ftskeen"
	"github.com/weft-dev/weft/amcast/skeen"
)

// TestBaselineAPIReadOnly: the baselines' Process types expose the Machine
// and Observable methods and read-only getters, never the outbox or the
// log's host callbacks that would let a caller make a replica send,
// persist or deliver what it never ordered (issue #10 item 8), and no
// exported fields.
func TestBaselineAPIReadOnly(t *testing.T) {
	forbidden := []string{"Send", "Persist", "Deliver", "DeliverDurable", "Execute", "Lead",
		"Commit", "Assign", "Propose", "SendTo", "SendGroup", "Rec", "Recs", "Learn", "Core", "Log", "Outbox"}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[*ftskeen.Process](),
		reflect.TypeFor[*fastcast.Process](),
		reflect.TypeFor[*skeen.Process](),
	} {
		for _, name := range forbidden {
			if _, ok := typ.MethodByName(name); ok {
				t.Errorf("%s has method %s", typ, name)
			}
		}
		st := typ.Elem()
		for i := 0; i < st.NumField(); i++ {
			if f := st.Field(i); f.IsExported() {
				t.Errorf("%s has exported field %s", typ, f.Name)
			}
		}
		for _, name := range []string{"ID", "Step", "Tick", "HasReady", "Ready", "Advance", "Rejected"} {
			if _, ok := typ.MethodByName(name); !ok {
				t.Errorf("%s lacks method %s", typ, name)
			}
		}
	}
}
