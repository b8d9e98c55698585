package console

import "golang.org/x/crypto/bcrypt"

// DummyCost is the bcrypt cost of the hash c checks an unknown name's
// password against.
func DummyCost(c *Console) int {
	cost, _ := bcrypt.Cost(c.dummyHash)
	return cost
}
