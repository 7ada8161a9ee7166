package boundedlog

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/fencestream/fencestream/topology"
)

// ValueLimit is the most bytes of one attribute (or message) a log line of
// the kit carries; longer ones are cut with topology.Excerpt. It is the
// backstop behind the explicit excerpts of keys (topology.KeyExcerpt) and
// dead-letter errors: an error from Goka or sarama may quote a record's key
// ("could not commit message with key '…'"), and a record's key or value may
// be a megabyte. A handler panic's stack fits.
const ValueLimit = 16 << 10

// New is l with every string, error and formatted attribute, and
// the message, cut to ValueLimit bytes: no log line carries an unbounded
// key or value (DESIGN rule 19). The kit wraps the logger each group is given.
func New(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(boundedHandler); ok {
		return l
	}
	return slog.New(boundedHandler{l.Handler()})
}

type boundedHandler struct{ h slog.Handler }

func (b boundedHandler) Enabled(ctx context.Context, l slog.Level) bool { return b.h.Enabled(ctx, l) }

func (b boundedHandler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, topology.Excerpt(r.Message, ValueLimit), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(boundAttr(a))
		return true
	})
	return b.h.Handle(ctx, nr)
}

func (b boundedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = boundAttr(a)
	}
	return boundedHandler{b.h.WithAttrs(out)}
}

func (b boundedHandler) WithGroup(name string) slog.Handler {
	return boundedHandler{b.h.WithGroup(name)}
}

// boundAttr is a with its value cut to ValueLimit. Values of other kinds
// than strings are formatted only when they are errors or of a kind a
// handler formats with fmt (slog.KindAny).
func boundAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); len(s) > ValueLimit {
			return slog.String(a.Key, topology.Excerpt(s, ValueLimit))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = boundAttr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case nil:
			return slog.Attr{Key: a.Key, Value: v}
		case error:
			s = x.Error()
		case []byte:
			s = string(x)
		default:
			s = fmt.Sprint(x)
		}
		if len(s) > ValueLimit {
			return slog.String(a.Key, topology.Excerpt(s, ValueLimit))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
