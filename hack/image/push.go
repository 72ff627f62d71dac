package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push writes a to the registry under tag and returns the reference by
// digest, which is what a signature names and a chart pins. Credentials
// come from the Docker config file (what `docker login` or a workflow's
// login step writes); a registry on localhost or a loopback address is
// spoken to over plain HTTP.
func Push(tag string, a Artifact) (string, error) {
	t, err := name.NewTag(tag, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("-push %q: want registry/repository:tag: %w", tag, err)
	}
	opts := []remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	switch a := a.(type) {
	case v1.Image:
		err = remote.Write(t, a, opts...)
	case v1.ImageIndex:
		err = remote.WriteIndex(t, a, opts...)
	default:
		err = fmt.Errorf("cannot push a %T", a)
	}
	if err != nil {
		return "", fmt.Errorf("pushing %s: %w", tag, err)
	}
	d, err := a.Digest()
	if err != nil {
		return "", err
	}
	return t.Context().Digest(d.String()).String(), nil
}
