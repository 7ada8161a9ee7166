package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	xscram "github.com/xdg-go/scram"
)

// Classes of connection failure. Diagnose wraps exactly one of them; only
// ErrUnreachable can heal by itself (retrying), the others need a settings
// change, so a process should say so and stop rather than wait.
var (
	// ErrUnreachable: nothing answers at the address (refused, timed out,
	// no route), or it answers but not as a Kafka broker.
	ErrUnreachable = errors.New("unreachable")
	// ErrTLS: the TLS handshake failed, or one side speaks TLS and the
	// other does not.
	ErrTLS = errors.New("TLS handshake")
	// ErrMechanism: the broker does not offer the SASL mechanism, has no
	// credentials of that mechanism for the user, or does not use SASL.
	ErrMechanism = errors.New("SASL mechanism")
	// ErrAuthentication: the broker refused the user's credentials, or
	// requires SASL and none was configured.
	ErrAuthentication = errors.New("authentication failed")
)

// Permanent reports whether err is a failure retrying cannot fix (TLS,
// mechanism or authentication).
func Permanent(err error) bool {
	return errors.Is(err, ErrTLS) || errors.Is(err, ErrMechanism) || errors.Is(err, ErrAuthentication)
}

// Diagnose walks one connection to the first broker step by step — TCP, TLS,
// the first Kafka request, SASL handshake and authentication — and returns
// the first step that fails, classified (wrapping one of the Err* above), or
// nil when every step succeeds. Kafka clients report most of these failures
// as "EOF" or a timeout; call Diagnose when a client cannot connect to say
// what is actually wrong.
func Diagnose(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	addr := c.Brokers[0]
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 10*time.Second {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: broker %s: %v", ErrUnreachable, addr, err)
	}
	defer raw.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	conn := raw
	if c.TLS {
		cfg, err := c.tlsConfig()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrTLS, err)
		}
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			host, _, _ := net.SplitHostPort(addr)
			cfg = cfg.Clone()
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return tlsError(addr, err)
		}
		conn = tc
	}
	k := &kconn{conn: conn, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("fencestream-diagnose"))}
	var versions kmsg.ApiVersionsResponse
	if err := k.do(kmsg.NewPtrApiVersionsRequest(), &versions); err != nil {
		if !c.TLS && closed(err) {
			return fmt.Errorf("%w: broker %s closed the connection at the first request: it probably requires TLS (--tls)", ErrTLS, addr)
		}
		if timeout(err) {
			return fmt.Errorf("%w: broker %s accepted the connection but did not answer a Kafka request: is it a Kafka listener%s?", ErrUnreachable, addr, map[bool]string{true: " (and does it use TLS?)", false: ""}[c.TLS])
		}
		return fmt.Errorf("%w: broker %s: first request: %v", ErrUnreachable, addr, err)
	}
	mech := strings.ToUpper(c.SASLMechanism)
	if mech == "" {
		meta := kmsg.NewPtrMetadataRequest()
		meta.Version = 1
		var resp kmsg.MetadataResponse
		resp.Version = 1
		if err := k.do(meta, &resp); err != nil {
			if closed(err) {
				return fmt.Errorf("%w: broker %s closed the connection before any SASL exchange: it probably requires SASL (--sasl-mechanism, --sasl-user, --sasl-password)", ErrAuthentication, addr)
			}
			return fmt.Errorf("%w: broker %s: metadata: %v", ErrUnreachable, addr, err)
		}
		return nil
	}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 1
	hs.Mechanism = mech
	var hsResp kmsg.SASLHandshakeResponse
	hsResp.Version = 1
	if err := k.do(hs, &hsResp); err != nil {
		if closed(err) {
			return fmt.Errorf("%w: broker %s closed the connection at the SASL handshake: does it use SASL on this listener?", ErrMechanism, addr)
		}
		return fmt.Errorf("%w: broker %s: SASL handshake: %v", ErrUnreachable, addr, err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		if errors.Is(err, kerr.UnsupportedSaslMechanism) {
			return fmt.Errorf("%w: %s is not enabled on broker %s (it offers %s)", ErrMechanism, mech, addr, strings.Join(hsResp.SupportedMechanisms, ", "))
		}
		return fmt.Errorf("%w: broker %s: SASL handshake: %v (does it use SASL on this listener?)", ErrMechanism, addr, err)
	}
	return k.authenticate(addr, mech, c.SASLUser, c.SASLPassword)
}

func (k *kconn) authenticate(addr, mech, user, pass string) error {
	step := func(msg []byte) ([]byte, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version = 1
		req.SASLAuthBytes = msg
		var resp kmsg.SASLAuthenticateResponse
		resp.Version = 1
		if err := k.do(req, &resp); err != nil {
			return nil, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			m := err.Error()
			if resp.ErrorMessage != nil {
				m += ": " + *resp.ErrorMessage
			}
			return nil, errors.New(m)
		}
		return resp.SASLAuthBytes, nil
	}
	refused := func(err error, what string) error {
		if closed(err) {
			return fmt.Errorf("%w: %s for user %q (%s): broker %s closed the connection", ErrAuthentication, what, user, mech, addr)
		}
		return fmt.Errorf("%w: %s for user %q (%s) at broker %s: %v", ErrAuthentication, what, user, mech, addr, err)
	}
	if mech == MechanismPlain {
		if _, err := step([]byte("\x00" + user + "\x00" + pass)); err != nil {
			return refused(err, "wrong user or password")
		}
		return nil
	}
	gen := xscram.SHA256
	if mech == MechanismSCRAMSHA512 {
		gen = xscram.SHA512
	}
	cl, err := gen.NewClient(user, pass, "")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	conv := cl.NewConversation()
	first, err := conv.Step("")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	serverFirst, err := step([]byte(first))
	if err != nil {
		// The broker looks the user up by mechanism before any password is
		// checked: a refusal here is a user without credentials of this
		// mechanism (the mechanism is wrong, or the user unknown).
		if closed(err) {
			return fmt.Errorf("%w: broker %s has no %s credentials for user %q: is the mechanism right (--sasl-mechanism) and the user known?", ErrMechanism, addr, mech, user)
		}
		return refused(err, "unknown user or wrong mechanism")
	}
	final, err := conv.Step(string(serverFirst))
	if err != nil {
		return fmt.Errorf("%w: SCRAM exchange with broker %s: %v", ErrAuthentication, addr, err)
	}
	serverFinal, err := step([]byte(final))
	if err != nil {
		return refused(err, "wrong password")
	}
	if _, err := conv.Step(string(serverFinal)); err != nil {
		return fmt.Errorf("%w: broker %s's SCRAM proof does not verify: %v", ErrAuthentication, addr, err)
	}
	return nil
}

func tlsError(addr string, err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
	)
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w: certificate of broker %s is signed by an authority not trusted here (give its CA with --tls-ca): %v", ErrTLS, addr, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: certificate of broker %s is not valid for the address dialled: %v", ErrTLS, addr, err)
	case errors.As(err, &invalid), errors.As(err, &verify):
		return fmt.Errorf("%w: certificate of broker %s is invalid: %v", ErrTLS, addr, err)
	case errors.As(err, &header):
		return fmt.Errorf("%w: broker %s does not speak TLS on this port (drop --tls?): %v", ErrTLS, addr, err)
	case errors.As(err, &alert):
		return fmt.Errorf("%w: broker %s refused the handshake (alert %v): does it require a client certificate (--tls-cert, --tls-key)?", ErrTLS, addr, err)
	case timeout(err) || closed(err):
		return fmt.Errorf("%w: broker %s did not complete a TLS handshake: it probably does not use TLS on this port (drop --tls?): %v", ErrTLS, addr, err)
	}
	return fmt.Errorf("%w: broker %s: %v", ErrTLS, addr, err)
}

func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset")
}

func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// kconn sends one Kafka request at a time and reads its response.
type kconn struct {
	conn net.Conn
	f    *kmsg.RequestFormatter
	corr int32
}

func (k *kconn) do(req kmsg.Request, resp kmsg.Response) error {
	k.corr++
	if _, err := k.conn.Write(k.f.AppendRequest(nil, req, k.corr)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(k.conn, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 16<<20 {
		return fmt.Errorf("response of %d bytes: not a Kafka broker", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(k.conn, body); err != nil {
		return err
	}
	body = body[4:] // correlation id
	// Flexible responses carry a tag section in their header, except
	// ApiVersions (whose header never does).
	if req.IsFlexible() && req.Key() != 18 && len(body) > 0 {
		body = body[1:] // no tagged fields: a zero count
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body)
}
