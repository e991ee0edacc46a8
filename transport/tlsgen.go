package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"time"

	"github.com/weft-dev/weft/wire"
)

// Development certificates (weft certs, tests): a self-signed ECDSA P-256
// CA that issues node and client certificates with the URI SANs tls.go
// checks. For production, use your own PKI with the same URI SANs.

// DevCA is a certificate authority whose key is in memory.
type DevCA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the PEM encodings of Cert and Key.
	CertPEM, KeyPEM []byte
}

// NewDevCA creates a self-signed CA valid from notBefore to notAfter.
func NewDevCA(name string, notBefore, notAfter time.Time) (*DevCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return devCA(der, key)
}

// LoadDevCA reads a CA written by NewDevCA (its PEM certificate and key).
func LoadDevCA(certPEM, keyPEM []byte) (*DevCA, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("CA certificate or key is not PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("CA key is a %T, want ECDSA", k)
	}
	return devCA(cb.Bytes, key)
}

func devCA(der []byte, key *ecdsa.PrivateKey) (*DevCA, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if !cert.IsCA {
		return nil, errors.New("not a CA certificate")
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &DevCA{Cert: cert, Key: key, CertPEM: certPEM(der), KeyPEM: kp}, nil
}

// Pool returns a pool holding the CA.
func (ca *DevCA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// CertSpec describes a certificate to issue.
type CertSpec struct {
	Cluster string
	// Identity is carried as a URI SAN (NodeURI or ClientURI); a zero Role
	// issues a certificate without one.
	Identity Identity
	// Hosts are added as DNS or IP SANs (for tools such as openssl; weft
	// checks only the URI).
	Hosts               []string
	NotBefore, NotAfter time.Time
}

// Issued is a certificate and its key.
type Issued struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// TLSCertificate returns the certificate and key as a tls.Certificate.
func (i *Issued) TLSCertificate() tls.Certificate {
	c, err := tls.X509KeyPair(i.CertPEM, i.KeyPEM)
	if err != nil {
		panic(fmt.Sprintf("transport: own issued certificate: %v", err)) // we just encoded it
	}
	return c
}

// Issue creates a certificate for spec, signed by the CA.
func (ca *DevCA) Issue(spec CertSpec) (*Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    spec.NotBefore,
		NotAfter:     spec.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	id := spec.Identity
	switch id.Role {
	case RoleNode:
		tmpl.Subject.CommonName = fmt.Sprintf("weft node %d", id.ID)
		tmpl.URIs = []*url.URL{NodeURI(spec.Cluster, id.ID)}
		// Nodes both accept and dial.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	case RoleClient:
		tmpl.Subject.CommonName = "weft " + id.String()
		tmpl.URIs = []*url.URL{ClientURI(spec.Cluster, id.ID, id.AnyClient)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		tmpl.Subject.CommonName = "weft client without identity"
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, h := range spec.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &Issued{Cert: cert, CertPEM: certPEM(der), KeyPEM: kp}, nil
}

// DevTLS returns a TLS configuration for one process: its certificate
// issued by nodeCA (or clientCA for a client when clientCA is set), the
// node CA and the client CA, valid from now for d. For tests and demos.
func DevTLS(cluster string, id Identity, nodeCA, clientCA *DevCA, d time.Duration) (*TLS, error) {
	issuer := nodeCA
	if id.Role == RoleClient && clientCA != nil {
		issuer = clientCA
	}
	now := time.Now()
	is, err := issuer.Issue(CertSpec{Cluster: cluster, Identity: id, NotBefore: now.Add(-time.Minute), NotAfter: now.Add(d)})
	if err != nil {
		return nil, err
	}
	c := &TLS{Certificate: is.TLSCertificate(), NodeCAs: nodeCA.Pool()}
	if clientCA != nil {
		c.ClientCAs = clientCA.Pool()
	}
	return c, nil
}

// NodeIdentity is node id's identity.
func NodeIdentity(id wire.ProcID) Identity { return Identity{Role: RoleNode, ID: id} }

// AnyClientIdentity is a client certificate's identity valid for any
// client id.
func AnyClientIdentity() Identity { return Identity{Role: RoleClient, AnyClient: true} }

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n.Add(n, big.NewInt(1))
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
