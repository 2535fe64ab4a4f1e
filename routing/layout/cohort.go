package layout

import (
	"github.com/kvroute/kvroute/reason"
)

// Member is one worker of a model as the cohort rule sees it: its published contract (nil when it
// publishes none) and its KV block size in tokens.
type Member struct {
	WorkerID  string
	Contract  *Contract
	BlockSize int
}

// Cohort is the agreement of every worker of one model.
type Cohort struct {
	// Contract is the agreed contract; nil when exact video routing is off (see Agree's error).
	Contract *Contract
	// Digest is the agreed contract's digest; "" with no agreement.
	Digest string
	// BlockSize is the common block size; 0 when the workers disagree.
	BlockSize int
}

// Agree applies the cohort rule of DESIGN.md §2.3 to every worker of one model, with the token ids
// of the router's own config.json. It returns the cohort and, when exact video routing must stay
// off, a *reason.Error with code (checked in this order):
//   - block_size_mismatch: the workers' block sizes differ (Cohort.BlockSize is then 0 and no
//     contract is agreed);
//   - contract_missing: no workers, or a worker publishes no contract;
//   - contract_unsupported: a contract fails Validate (the message names the worker and field);
//   - contract_mismatch: the digests differ, or the agreed token_ids differ from the router's.
//
// With an error, Cohort.Contract is nil; Cohort.BlockSize is set whenever the block sizes agree,
// since text-prefix routing still needs it.
func Agree(members []Member, ids TokenIDs) (Cohort, error) {
	var co Cohort
	if len(members) == 0 {
		return co, reason.New(reason.ContractMissing, "model has no workers")
	}
	bs := members[0].BlockSize
	for _, m := range members[1:] {
		if m.BlockSize != bs {
			return co, reason.New(reason.BlockSizeMismatch, "worker %q has block size %d, worker %q has %d",
				members[0].WorkerID, bs, m.WorkerID, m.BlockSize)
		}
	}
	co.BlockSize = bs
	for _, m := range members {
		if m.Contract == nil {
			return co, reason.New(reason.ContractMissing, "worker %q publishes no video contract", m.WorkerID)
		}
	}
	digests := make([]string, len(members))
	for i, m := range members {
		if err := m.Contract.Validate(); err != nil {
			return co, reason.Wrap(reason.ContractUnsupported, err, "worker %q", m.WorkerID)
		}
		d, err := m.Contract.Digest()
		if err != nil {
			return co, reason.Wrap(reason.ContractUnsupported, err, "worker %q", m.WorkerID)
		}
		digests[i] = d
	}
	for i, d := range digests[1:] {
		if d != digests[0] {
			return co, reason.New(reason.ContractMismatch, "worker %q has contract digest %s, worker %q has %s",
				members[0].WorkerID, digests[0], members[i+1].WorkerID, d)
		}
	}
	if got := members[0].Contract.TokenIDs; got != ids {
		return co, reason.New(reason.ContractMismatch, "contract token_ids %+v differ from the model's config.json %+v", got, ids)
	}
	co.Contract = members[0].Contract
	co.Digest = digests[0]
	return co, nil
}
