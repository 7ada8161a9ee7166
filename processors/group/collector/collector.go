package collector

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg, or returns the collector of the same
// description reg already holds (another processor's, or an earlier build's),
// so processors sharing a registry share its series instead of failing. Any
// other registration error (a name reused with other labels) is returned.
// Application metrics register the same way as the kit's.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
		return c, fmt.Errorf("%w: the registered collector is a %T", err, are.ExistingCollector)
	}
	return c, err
}
