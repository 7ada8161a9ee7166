package embedded

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrUsersMissing is wrapped by Start when a data directory whose broker
// required SASL is started with no user and without DropSASL: starting it
// would let anyone in.
var ErrUsersMissing = errors.New("embedded broker: the data directory's broker required SASL and no user is given")

// DropSASL lets a broker whose data directory required SASL start with no
// user, open to anyone (default: such a start is refused with ErrUsersMissing).
// It has no effect when users are given.
func DropSASL() Opt { return func(c *config) { c.dropSASL = true } }

const (
	// saslMarker records, without any secret, that the broker on this data
	// directory required SASL, so a start that forgot the users is refused
	// instead of opening the cluster.
	saslMarker = "fencestream-sasl-required"
	// kfakeSASL is where kfake persists its users: PLAIN passwords in clear
	// and SCRAM salted passwords (enough to compute a client proof). The
	// options are the only source of users, so the file is deleted whenever
	// kfake has written it.
	kfakeSASL = "sasl.json"
)

// prepareSASL runs with the data directory locked, before kfake reads it: it
// refuses a start that would drop authentication by omission, records that
// users are required, and deletes kfake's stored users so the options alone
// decide who may log in.
func prepareSASL(dir string, users int, drop bool) error {
	marker := filepath.Join(dir, saslMarker)
	if users == 0 {
		had, err := hadSASL(dir)
		if err != nil {
			return err
		}
		if had && !drop {
			return fmt.Errorf("%w: %s was served with SASL users, and starting it without them would let anyone in", ErrUsersMissing, dir)
		}
		if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("embedded broker: dropping SASL: %w", err)
		}
	} else if err := writeMarker(marker); err != nil {
		return err
	}
	return removeStoredUsers(dir)
}

// hadSASL reports whether the broker on dir required SASL: the marker, or
// users in a sasl.json left by a broker that predates the marker.
func hadSASL(dir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, saslMarker)); err == nil {
		return true, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("embedded broker: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(dir, kfakeSASL))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("embedded broker: %w", err)
	}
	var stored struct {
		Plain    map[string]json.RawMessage `json:"plain"`
		Scram256 map[string]json.RawMessage `json:"scram256"`
		Scram512 map[string]json.RawMessage `json:"scram512"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		// Unreadable: it may have held users, so it counts as having had them.
		return true, nil
	}
	return len(stored.Plain)+len(stored.Scram256)+len(stored.Scram512) > 0, nil
}

func writeMarker(path string) error {
	tmp := path + ".tmp"
	body := []byte("the embedded broker on this directory requires SASL users; starting it without them is refused\n")
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		return fmt.Errorf("embedded broker: recording SASL: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("embedded broker: recording SASL: %w", err)
	}
	return nil
}

// removeStoredUsers deletes kfake's user store and its temporary file.
func removeStoredUsers(dir string) error {
	var errs []error
	for _, name := range []string{kfakeSASL, kfakeSASL + ".tmp"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("embedded broker: deleting stored SASL users: %w", err)
	}
	return nil
}
