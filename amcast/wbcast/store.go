package wbcast

import (
	"github.com/weft-dev/weft/amcast"
	"github.com/weft-dev/weft/wire"
)

// Store is a WbCast process's durable image (see amcast.Store).
type Store struct {
	recs []wire.Message // placeholder until recovery lands
}

var _ amcast.Store = (*Store)(nil)

// NewStore returns an empty store (a process that never persisted anything).
func NewStore() *Store { return &Store{} }

// Apply implements amcast.Store.
func (s *Store) Apply(rec wire.Message) error {
	s.recs = append(s.recs, rec)
	return nil
}

// Restore rebuilds a process after a crash from its durable image.
func Restore(cfg Config, st *Store) (*Process, error) {
	return New(cfg)
}
