package group

import (
	"fmt"

	"github.com/lovoo/goka"

	"github.com/fencestream/fencestream/codecs"
)

// Joined is another group's table the group reads for the key it is
// processing (Goka's Join): the table must be co-partitioned with the group's
// inputs, so the value is local and no network hop is taken.
type Joined[M any, PM codecs.Message[M]] struct {
	table string
	owner *handleOwner
	seq   int
}

// Join declares that the group reads table (values *M) for its current key;
// the topology declaration must list it under Joins.
func Join[M any, PM codecs.Message[M]](g AnyGroup, table string) Joined[M, PM] {
	owner, seq := g.declare(edgeJoin, table, msgName[M, PM](), goka.Join(goka.Table(table), envelopeCodec[M, PM]{}))
	return Joined[M, PM]{table: table, owner: owner, seq: seq}
}

// Get returns the joined table's value for the key c is processing, or nil.
func (j Joined[M, PM]) Get(c Reader) (PM, error) {
	if err := c.checkHandle(j.owner, j.seq, "Joined "+j.table); err != nil {
		return nil, err
	}
	v, err := StateOf[M, PM](c.join(j.table))
	if err != nil {
		return nil, fmt.Errorf("join %s: %w", j.table, err)
	}
	return v, nil
}

// Looked is another group's table the group reads for any key (Goka's
// Lookup): every instance keeps all of it.
type Looked[M any, PM codecs.Message[M]] struct {
	table string
	owner *handleOwner
	seq   int
}

// Lookup declares that the group reads table (values *M) for any key; the
// topology declaration must list it under Lookups.
func Lookup[M any, PM codecs.Message[M]](g AnyGroup, table string) Looked[M, PM] {
	owner, seq := g.declare(edgeLookup, table, msgName[M, PM](), goka.Lookup(goka.Table(table), envelopeCodec[M, PM]{}))
	return Looked[M, PM]{table: table, owner: owner, seq: seq}
}

// Get returns the looked-up table's value for key, or nil.
func (l Looked[M, PM]) Get(c Reader, key string) (PM, error) {
	if err := c.checkHandle(l.owner, l.seq, "Looked "+l.table); err != nil {
		return nil, err
	}
	v, err := StateOf[M, PM](c.lookup(l.table, key))
	if err != nil {
		return nil, fmt.Errorf("lookup %s key %q: %w", l.table, key, err)
	}
	return v, nil
}

// Reader is a handler's Context (of any group), for Joined.Get and
// Looked.Get.
type Reader interface {
	join(table string) any
	lookup(table, key string) any
	checkHandle(owner *handleOwner, seq int, what string) error
}

func (c *Context[S, PS]) join(table string) any { return c.g.Join(goka.Table(table)) }

func (c *Context[S, PS]) lookup(table, key string) any {
	return c.g.Lookup(goka.Table(table), key)
}
