package embedded_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fencestream/fencestream/topology/dirlock"
	"github.com/fencestream/fencestream/topology/embedded"
)

// login reports whether a franz-go client logging in as u gets the broker's
// metadata (nil) or why not.
func login(t *testing.T, b *embedded.Broker, u embedded.User) error {
	t.Helper()
	var m sasl.Mechanism
	switch u.Mechanism {
	case "PLAIN":
		m = plain.Auth{User: u.Name, Pass: u.Password}.AsMechanism()
	case "SCRAM-SHA-256":
		m = scram.Auth{User: u.Name, Pass: u.Password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		m = scram.Auth{User: u.Name, Pass: u.Password}.AsSha512Mechanism()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(b.Addrs()...), kgo.RequestRetries(0)}
	if m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	kc, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = kadm.NewClient(kc).BrokerMetadata(ctx)
	if ctx.Err() != nil {
		t.Fatalf("login as %q: no answer within 20s", u.Name)
	}
	return err
}

func users(t *testing.T, specs ...string) (opts []embedded.Opt, us []embedded.User) {
	t.Helper()
	for _, s := range specs {
		u, err := embedded.ParseUser(s)
		if err != nil {
			t.Fatal(err)
		}
		us = append(us, u)
		opts = append(opts, u.Opt())
	}
	return opts, us
}

func startWith(t *testing.T, dir string, opts ...embedded.Opt) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(append([]embedded.Opt{embedded.DataDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSASLUsersFollowTheOptions: after a restart the users given are exactly
// the ones accepted. On main kfake's sasl.json won over the options: the old
// password still worked, the new one was refused, and a removed user got in.
func TestSASLUsersFollowTheOptions(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			dir := t.TempDir()
			opts, first := users(t, mech+":alice:old-secret", mech+":bob:bob-secret")
			b := startWith(t, dir, opts...)
			for _, u := range first {
				if err := login(t, b, u); err != nil {
					b.Close()
					t.Fatalf("first run, %s: %v", u.Name, err)
				}
			}
			b.Close()

			// A new password for alice; bob is gone; dave is new.
			opts, second := users(t, mech+":alice:new-secret", mech+":dave:dave-secret")
			b = startWith(t, dir, opts...)
			defer b.Close()
			for _, u := range second {
				if err := login(t, b, u); err != nil {
					t.Errorf("after the restart, %s with the password given now: %v", u.Name, err)
				}
			}
			for _, u := range first {
				if err := login(t, b, u); err == nil {
					t.Errorf("after the restart, %s with the password of the first run was accepted", u.Name)
				}
			}
			if err := login(t, b, embedded.User{}); err == nil {
				t.Error("after the restart, a client without SASL was accepted")
			}
		})
	}
}

// TestBrokerThatHadUsersNeverOpensByOmission: a data directory served with
// users refuses a start without any (on main it started open to anyone);
// DropSASL opens it on purpose, and from then on no flag is needed.
func TestBrokerThatHadUsersNeverOpensByOmission(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	opts, _ := users(t, "SCRAM-SHA-256:alice:s3cret")
	startWith(t, dir, opts...).Close()

	before := contents(t, dir)
	b, err := embedded.Start(embedded.DataDir(dir))
	if err == nil {
		open := login(t, b, embedded.User{}) == nil
		b.Close()
		t.Fatalf("a start without users succeeded (a client without SASL accepted: %v)", open)
	}
	if !errors.Is(err, embedded.ErrUsersMissing) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q: want ErrUsersMissing naming %s", err, dir)
	}
	if after := contents(t, dir); after != before {
		t.Fatalf("the refused start changed the directory:\nbefore %s\nafter  %s", before, after)
	}

	b = startWith(t, dir, embedded.DropSASL())
	if err := login(t, b, embedded.User{}); err != nil {
		t.Errorf("after DropSASL a client without SASL was refused: %v", err)
	}
	b.Close()
	startWith(t, dir).Close() // dropped for good: no option needed any more
}

// TestLegacyStoredUsersCountAsRequired: a directory whose kfake sasl.json
// (from before this check) holds users is treated as having required SASL.
func TestLegacyStoredUsersCountAsRequired(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	startWith(t, dir).Close()
	legacy := `{"version":1,"plain":{"alice":"s3cret"}}`
	if err := os.WriteFile(filepath.Join(dir, "sasl.json"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := embedded.Start(embedded.DataDir(dir)); !errors.Is(err, embedded.ErrUsersMissing) {
		if err == nil {
			b.Close()
		}
		t.Fatalf("start over a legacy sasl.json with users: %v, want ErrUsersMissing", err)
	}
	// Given users, the legacy file is gone and its clear password with it.
	opts, _ := users(t, "PLAIN:alice:other")
	startWith(t, dir, opts...).Close()
	if _, err := os.Stat(filepath.Join(dir, "sasl.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("legacy sasl.json still there: %v", err)
	}
}

// TestNoSecretIsStored: neither while running nor after a clean close does
// any file of the data directory hold a password, and what records that SASL
// is required is readable by the owner only. On main sasl.json (0644) held the
// PLAIN password in clear and SCRAM salted passwords.
func TestNoSecretIsStored(t *testing.T) {
	if testing.Short() {
		t.Skip("broker test")
	}
	dir := t.TempDir()
	opts, us := users(t, "PLAIN:alice:plain-pass-123", "SCRAM-SHA-256:bob:scram-pass-456", "SCRAM-SHA-512:carol:scram-pass-789")
	b := startWith(t, dir, opts...)
	check := func(when string) {
		t.Helper()
		err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			if filepath.Base(path) == "sasl.json" {
				t.Errorf("%s: kfake's user store %s exists (mode %v)", when, path, info.Mode().Perm())
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, u := range us {
				if bytes.Contains(data, []byte(u.Password)) {
					t.Errorf("%s: %s holds %s's password in clear", when, path, u.Name)
				}
			}
			if strings.HasPrefix(filepath.Base(path), "fencestream-sasl") && info.Mode().Perm() != 0o600 {
				t.Errorf("%s: %s has mode %v, want 0600", when, path, info.Mode().Perm())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range us {
		if err := login(t, b, u); err != nil {
			t.Fatalf("%s: %v", u.Name, err)
		}
	}
	check("running")
	b.Close()
	check("closed")
	if _, err := os.Stat(filepath.Join(dir, "fencestream-sasl-required")); err != nil {
		t.Fatalf("no record that SASL is required: %v", err)
	}
}

// contents is listing without the lock file, which every start rewrites.
func contents(t *testing.T, dir string) string {
	t.Helper()
	var kept []string
	for _, e := range strings.Split(listing(t, dir), ";") {
		if !strings.Contains(e, dirlock.FileName) {
			kept = append(kept, e)
		}
	}
	return strings.Join(kept, ";")
}
