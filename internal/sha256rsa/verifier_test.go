package sha256rsa

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"math/big"
	"sync"
	"testing"
)

// rsaKeys are generated once: a 2048-bit key (Alipay's and WeChat Pay's size) and a 3072-bit
// one with another exponent.
var rsaKeys = sync.OnceValues(func() ([]*rsa.PrivateKey, error) {
	var keys []*rsa.PrivateKey
	for _, bits := range []int{2048, 3072} {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
})

func testKeys(t testing.TB) []*rsa.PrivateKey {
	t.Helper()
	keys, err := rsaKeys()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// agree checks that Verifier and crypto/rsa give the same answer for sig
// over digest, and returns it.
func agree(t testing.TB, v *Verifier, pub *rsa.PublicKey, digest [sha256.Size]byte, sig []byte) error {
	t.Helper()
	want := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig)
	got := v.Verify(&digest, sig)
	if got != want && !(errors.Is(got, rsa.ErrVerification) && errors.Is(want, rsa.ErrVerification)) {
		t.Fatalf("verifier says %v, crypto/rsa says %v (sig %x)", got, want, sig)
	}
	return got
}

func TestVerifierMatchesCryptoRSA(t *testing.T) {
	for _, key := range testKeys(t) {
		pub := &key.PublicKey
		v, err := New(pub)
		if err != nil {
			t.Fatal(err)
		}
		digest := sha256.Sum256([]byte("app_id=2021000000000000&trade_no=T1"))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		if err := agree(t, v, pub, digest, sig); err != nil {
			t.Fatalf("%d bits: valid signature refused: %v", pub.N.BitLen(), err)
		}
		other := sha256.Sum256([]byte("app_id=2021000000000000&trade_no=T2"))
		nDigest, nPlus := nonCanonical(t, key)
		bad := map[string]struct {
			digest [sha256.Size]byte
			sig    []byte
		}{
			"other digest":  {other, sig},
			"short":         {digest, sig[1:]},
			"long":          {digest, append([]byte{0}, sig...)},
			"empty":         {digest, nil},
			"zero":          {digest, make([]byte, len(sig))},
			"modulus":       {digest, pub.N.Bytes()},
			"sig plus n":    {nDigest, nPlus},
			"all ones":      {digest, bytesOf(0xff, len(sig))},
			"sig of digest": {digest, digest[:]},
		}
		for i := range len(sig) * 8 {
			flipped := append([]byte(nil), sig...)
			flipped[i/8] ^= 1 << (i % 8)
			if err := agree(t, v, pub, digest, flipped); err == nil {
				t.Fatalf("%d bits: signature with bit %d flipped accepted", pub.N.BitLen(), i)
			}
		}
		for name, c := range bad {
			if err := agree(t, v, pub, c.digest, c.sig); !errors.Is(err, rsa.ErrVerification) {
				t.Errorf("%d bits, %s: %v, want rsa.ErrVerification", pub.N.BitLen(), name, err)
			}
		}
	}
}

// nonCanonical returns a digest and s + n, s its valid signature, still k
// bytes long: the same residue as s, so a verifier that reduced its input
// mod n instead of refusing s ≥ n would accept it. A signature is below n,
// and s + n fits in k bytes for about a third of them; 64 messages make
// finding none a one-in-10¹¹ event.
func nonCanonical(t *testing.T, key *rsa.PrivateKey) ([sha256.Size]byte, []byte) {
	t.Helper()
	for i := range 64 {
		digest := sha256.Sum256([]byte{byte(i)})
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		if s := new(big.Int).Add(new(big.Int).SetBytes(sig), key.N); len(s.Bytes()) == key.Size() {
			return digest, s.Bytes()
		}
	}
	t.Fatal("no signature s with s + n of k bytes in 64 tries")
	return [sha256.Size]byte{}, nil
}

// A signature over the right digest with the wrong padding or hash
// identifier — made with the private key, so only the encoding is wrong —
// is refused by both.
func TestVerifierRefusesOtherEncodings(t *testing.T) {
	key := testKeys(t)[0]
	v, err := New(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("content"))
	k := key.Size()
	em := encodeSHA256(k, &digest)
	edits := map[string]func([]byte){
		"first byte":     func(em []byte) { em[0] = 1 },
		"block type 2":   func(em []byte) { em[1] = 2 },
		"padding byte":   func(em []byte) { em[10] = 0xfe },
		"no separator":   func(em []byte) { em[k-len(sha256DigestInfo)-sha256.Size-1] = 0xff },
		"other hash OID": func(em []byte) { em[k-sha256.Size-len(sha256DigestInfo)+14] = 0x1a },
		"digest byte":    func(em []byte) { em[k-1] ^= 1 },
	}
	for name, edit := range edits {
		m := append([]byte(nil), em...)
		edit(m)
		sig := rawSign(key, m)
		if err := agree(t, v, &key.PublicKey, digest, sig); !errors.Is(err, rsa.ErrVerification) {
			t.Errorf("%s: %v, want rsa.ErrVerification", name, err)
		}
	}
	if err := agree(t, v, &key.PublicKey, digest, rawSign(key, em)); err != nil {
		t.Fatalf("the encoding itself, signed raw: %v", err)
	}
}

// rawSign is m^d mod n: RSA with no padding, to sign an encoding of our own.
func rawSign(key *rsa.PrivateKey, m []byte) []byte {
	s := new(big.Int).Exp(new(big.Int).SetBytes(m), key.D, key.N)
	return s.FillBytes(make([]byte, key.Size()))
}

func bytesOf(b byte, n int) []byte {
	s := make([]byte, n)
	for i := range s {
		s[i] = b
	}
	return s
}

func TestNewVerifierRefusesWeakKeys(t *testing.T) {
	key := testKeys(t)[0]
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for name, pub := range map[string]*rsa.PublicKey{
		"1024 bits":     &small.PublicKey,
		"no modulus":    {E: 65537},
		"even modulus":  {N: new(big.Int).Lsh(key.N, 1), E: 65537},
		"exponent 1":    {N: key.N, E: 1},
		"even exponent": {N: key.N, E: 65536},
		"huge exponent": {N: key.N, E: 1 << 31},
	} {
		if _, err := New(pub); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzVerifier holds Verifier to crypto/rsa on signatures derived from a
// valid one.
func FuzzVerifier(f *testing.F) {
	key := testKeys(f)[0]
	v, err := New(&key.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	msg := []byte("notify_id=1&trade_no=T1")
	digest := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg, sig)
	f.Add([]byte("other"), sig)
	f.Add(msg, sig[:10])
	f.Fuzz(func(t *testing.T, msg, sig []byte) {
		agree(t, v, &key.PublicKey, sha256.Sum256(msg), sig)
	})
}

func BenchmarkVerifier(b *testing.B) {
	key := testKeys(b)[0]
	v, err := New(&key.PublicKey)
	if err != nil {
		b.Fatal(err)
	}
	digest := sha256.Sum256([]byte("content"))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("verifier", func(b *testing.B) {
		for b.Loop() {
			if err := v.Verify(&digest, sig); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("crypto-rsa", func(b *testing.B) {
		for b.Loop() {
			if err := rsa.VerifyPKCS1v15(&key.PublicKey, crypto.SHA256, digest[:], sig); err != nil {
				b.Fatal(err)
			}
		}
	})
}
