package streams_test

import (
	"fmt"
	"testing"
)

// exampleT lets an Example run the test driver: a failure is printed (so
// the example's output no longer matches) and stops the example; cleanups
// run at done.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (e *exampleT) Helper()                           {}
func (e *exampleT) Cleanup(f func())                  { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) Errorf(format string, args ...any) { fmt.Printf("error: "+format+"\n", args...) }
func (e *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (e *exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }

func (e *exampleT) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
