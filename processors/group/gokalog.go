package group

import (
	"fmt"
	"log/slog"
	"strings"
)

type gokaLogger struct{ l *slog.Logger }

func (g gokaLogger) Print(v ...any)   { g.l.Debug(strings.TrimSpace(fmt.Sprint(v...))) }
func (g gokaLogger) Println(v ...any) { g.l.Debug(strings.TrimSpace(fmt.Sprintln(v...))) }
func (g gokaLogger) Printf(format string, v ...any) {
	g.l.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)))
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
