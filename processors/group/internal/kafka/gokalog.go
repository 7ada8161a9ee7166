package kafka

import (
	"fmt"
	"log/slog"
	"strings"
)

// Logger is Goka's logger writing to l at debug level: Goka's chatter is the
// kit's detail, never its news.
type Logger struct{ L *slog.Logger }

func (g Logger) Print(v ...any)   { g.L.Debug(strings.TrimSpace(fmt.Sprint(v...))) }
func (g Logger) Println(v ...any) { g.L.Debug(strings.TrimSpace(fmt.Sprintln(v...))) }
func (g Logger) Printf(format string, v ...any) {
	g.L.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
