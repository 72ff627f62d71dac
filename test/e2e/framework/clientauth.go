package framework

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// webhookClientAuth makes the API server authenticate to webhooks with a
// client certificate, as an operator configures it for dsguard's
// --client-ca-file: a CA, a client certificate it signs, the kubeconfig the
// admission plugin reads the certificate from (user "*": every webhook) and
// the AdmissionConfiguration naming that kubeconfig. It returns the CA file
// for dsguard and the configuration file for kube-apiserver's
// --admission-control-config-file.
//
// With staticDir set, the ValidatingAdmissionPolicy plugin also loads the
// static policies in that directory.
func webhookClientAuth(dir, staticDir string) (caFile, admissionConfig string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook client CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver-webhook-client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	caFile = filepath.Join(dir, "webhook-client-ca.crt")
	kubeconfig := filepath.Join(dir, "webhook-client.kubeconfig")
	admissionConfig = filepath.Join(dir, "admission-config.yaml")
	files := map[string]string{
		caFile: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		kubeconfig: fmt.Sprintf(`apiVersion: v1
kind: Config
users:
  - name: "*"
    user:
      client-certificate-data: %s
      client-key-data: %s
`, b64("CERTIFICATE", leafDER), b64("EC PRIVATE KEY", keyDER)),
		admissionConfig: fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %s
`, kubeconfig) + staticPolicies(staticDir),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return "", "", err
		}
	}
	return caFile, admissionConfig, nil
}

// staticPolicies is the AdmissionConfiguration entry that loads the static
// policies of dir, "" without one.
func staticPolicies(dir string) string {
	if dir == "" {
		return ""
	}
	return fmt.Sprintf(`  - name: ValidatingAdmissionPolicy
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: ValidatingAdmissionPolicyConfiguration
      staticManifestsDir: %s
`, dir)
}

// staticConfinement writes, for each user, what `dsguard vap
// --static-confinement` prints into a static manifests directory under dir.
// All users' policies share the static object names, so only one user is
// supported per directory.
func staticConfinement(dsguard, dir string, users []string) (string, error) {
	if len(users) != 1 {
		return "", fmt.Errorf("static confinement for %d users: the policy has one name, so one user", len(users))
	}
	static := filepath.Join(dir, "static-policies")
	if err := os.MkdirAll(static, 0o700); err != nil {
		return "", err
	}
	out, err := exec.Command(dsguard, "vap", "--static-confinement", users[0]).Output()
	if err != nil {
		return "", fmt.Errorf("dsguard vap --static-confinement %s: %w", users[0], err)
	}
	return static, os.WriteFile(filepath.Join(static, "dsguard-confinement.yaml"), out, 0o600)
}
