package rsm

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/weft-dev/weft/wire"
)

// queryCounter is a counter that answers queries: "sum" returns the sum,
// "big" a result over the limit, anything else fails.
type queryCounter struct{ counter }

func (c *queryCounter) Query(q []byte) ([]byte, error) {
	switch string(q) {
	case "sum":
		return binary.AppendUvarint(nil, c.sum), nil
	case "big":
		return make([]byte, 100), nil
	}
	return nil, errors.New("unknown query")
}

// TestQuery: a query sees the state at the applied gts, which it returns;
// a failed query, a result over MaxResult and a state machine without
// Query are errors of their own kinds; a failed driver answers no query.
func TestQuery(t *testing.T) {
	qc := &queryCounter{}
	d, err := NewDriver(qc, Config{MaxResult: 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Apply([]Entry{entry(1, 1, "\x02"), entry(2, 2, "\x03")}); err != nil {
		t.Fatal(err)
	}
	res, at, err := d.Query([]byte("sum"))
	if v, _ := binary.Uvarint(res); err != nil || v != 5 || at != (wire.Timestamp{T: 2}) {
		t.Fatalf("Query(sum) = %d at %s, %v; want 5 at 2.g0", v, at, err)
	}
	if _, _, err := d.Query([]byte("x")); !errors.Is(err, ErrQuery) {
		t.Errorf("a failing query: %v, want ErrQuery", err)
	}
	if _, _, err := d.Query([]byte("big")); !errors.Is(err, ErrResultTooLarge) {
		t.Errorf("a query's result over MaxResult: %v, want ErrResultTooLarge", err)
	}
	plain, _ := newDriver(t, Config{})
	if _, _, err := plain.Query([]byte("sum")); !errors.Is(err, ErrNoQuery) {
		t.Errorf("a state machine without Query: %v, want ErrNoQuery", err)
	}
	if err := d.Apply([]Entry{entry(3, 3, "fail")}); err == nil {
		t.Fatal("want the state machine's failure")
	}
	if _, _, err := d.Query([]byte("sum")); err == nil || errors.Is(err, ErrQuery) {
		t.Errorf("a query of a failed driver: %v, want its sticky failure", err)
	}
}
