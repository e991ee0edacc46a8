package rsm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/node"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

// counter is a replicated counter: a message's payload is a decimal number
// to add, its result the new total (8 bytes, big-endian).
type counter struct{ total int64 }

func (c *counter) Apply(batch []rsm.Entry) ([][]byte, error) {
	out := make([][]byte, len(batch))
	for i, e := range batch {
		n, err := strconv.ParseInt(string(e.Payload), 10, 64)
		if err != nil {
			out[i] = []byte("not a number") // a bad command is a result, not an error
			continue
		}
		c.total += n
		out[i] = binary.BigEndian.AppendUint64(nil, uint64(c.total))
	}
	return out, nil
}

func (c *counter) Snapshot(w io.Writer) error { return binary.Write(w, binary.BigEndian, c.total) }
func (c *counter) Restore(r io.Reader) error  { return binary.Read(r, binary.BigEndian, &c.total) }

// A replicated counter on weft: one group of three replicas on loopback,
// each node running its own copy of the state machine; the client gets
// the group's result with every message.
func Example() {
	topo, _ := amcast.NewTopology(1, 3)
	dir, _ := os.MkdirTemp("", "weft-example")
	defer os.RemoveAll(dir)
	peers := map[wire.ProcID]string{}
	lns := map[wire.ProcID]net.Listener{}
	for p := range wire.ProcID(3) {
		lns[p], _ = net.Listen("tcp", "127.0.0.1:0")
		peers[p] = lns[p].Addr().String()
	}
	for p := range wire.ProcID(3) {
		n, err := node.New(node.Config{
			Cluster: "example", ID: p, Topology: topo, Peers: peers, Listener: lns[p],
			DataDir:      filepath.Join(dir, fmt.Sprint("n", p)),
			StateMachine: &counter{}, // this replica's copy of the service
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		defer n.Close()
	}
	cl, _ := client.New(client.Config{Cluster: "example", Topology: topo, Nodes: peers})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, add := range []string{"5", "10", "-3"} {
		res, err := cl.Multicast(ctx, []wire.GroupID{0}, []byte(add))
		if err != nil {
			fmt.Println(err)
			return
		}
		total, _ := res.Of(0)
		fmt.Printf("add %s: total %d\n", add, int64(binary.BigEndian.Uint64(total)))
	}
	// Output:
	// add 5: total 5
	// add 10: total 15
	// add -3: total 12
}
