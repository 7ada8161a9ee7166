package host

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it; when reg already holds a
// collector with the same descriptor (a second instance of a processor in one
// process) it returns that one, so both count into it. Any other registration
// error (a name reused with other labels) is returned.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if have, ok := already.ExistingCollector.(C); ok {
				return have, nil
			}
		}
		return c, err
	}
	return c, nil
}
