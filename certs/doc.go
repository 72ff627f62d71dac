// Package certs serves dsguard's webhook certificate when no cert-manager is
// installed: a CA kept in a Secret and a serving certificate signed in memory
// by each replica, using cert-manager's Go library (pkg/server/tls
// DynamicSource and DynamicAuthority), and the caBundle of dsguard's own
// ValidatingWebhookConfiguration kept in step.
//
// A CA rotation never fails a request: the caBundle holds the new CA next to
// the old one before any replica serves a certificate signed by the new one,
// and a CA leaves the bundle only when it has expired. This is the only
// package that imports cert-manager; cmd hands the webhook server its
// GetCertificate function.
package certs
