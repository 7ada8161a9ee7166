package embedded

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// User is one SASL user of the embedded broker, as the operator flags give it:
// MECHANISM:USER:PASSWORD.
type User struct{ Mechanism, Name, Password string }

// ParseUser parses MECHANISM:USER:PASSWORD (the password may hold colons);
// the error never shows the password.
func ParseUser(v string) (User, error) {
	parts := strings.SplitN(v, ":", 3)
	if len(parts) != 3 || parts[1] == "" {
		return User{}, fmt.Errorf("SASL user %q: want MECHANISM:USER:PASSWORD", redact(v))
	}
	u := User{Mechanism: strings.ToUpper(parts[0]), Name: parts[1], Password: parts[2]}
	switch u.Mechanism {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
	default:
		return User{}, fmt.Errorf("SASL user %q: mechanism %q: want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", redact(v), parts[0])
	}
	return u, nil
}

func redact(v string) string {
	if parts := strings.SplitN(v, ":", 3); len(parts) == 3 {
		return parts[0] + ":" + parts[1] + ":***"
	}
	return v
}

// Opt is the broker option that requires SASL and accepts u (a superuser:
// kfake checks no ACLs for it).
func (u User) Opt() Opt { return SASL(u.Mechanism, u.Name, u.Password) }

// TLSFiles serves TLS with the PEM certificate (chain) and key in the files.
func TLSFiles(certFile, keyFile string) (Opt, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("embedded broker TLS certificate: %w", err)
	}
	return TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), nil
}
