// LossGuard: leaves gba when the workers' training loss rises significantly above what sync
// reached, returning the shards to the state they entered gba with, and holds gba back for as
// long as the run had lasted.
//
// Why: at large global batches gba's one-version staleness can destabilise momentum at the
// schedule's peak learning rate (docs/measurements/auto-at-scale.md, "Where gba's gap at G = 1,024
// comes from": simulated, N = 16, G = 1,024, gba's test loss climbs from 2.3 to 3.1 within ~20
// updates and the run never recovers). Throughput and the staleness-cost model cannot see it coming
// (the efficiency measured in gba reads 0.80-1.0 there, as at G = 256 where gba is fine); the loss
// sees it as it happens. Switching later works: a forced switch at >= 40% of the run ended at
// sync's accuracy in 67-73% of sync's time, one before ~30% never recovered.
//
// The rule, with no constant of its own:
//   - Reference: when the job enters gba, the level the last K training losses the members
//     reported in sync had reached: a least-squares line through them, read at the last one,
//     with its standard error (K = the straggler detector's window W times the number of
//     workers: the same evidence a mode decision rests on).
//   - Test: every window of at least K losses reported in gba (non-overlapping; judged at the
//     decision rounds) gives the same end level, and
//     z = (level_gba − level_sync) / √(se_gba² + se_sync²) > ModePolicy::kSignificanceZ trips:
//     marks the window significant: the model is now significantly worse than the point it
//     can return to. Training loss falls as a run goes on, so the test grows more
//     conservative with time.
//   - Trip: two significant windows in a row, SwitchConfirmation's rule for every mode switch
//     (the next window shares no loss with the first, so a false trip needs two unlucky
//     windows: the one-window test tripped falsely on the real bench at N = 4, z 2.32 and 2.80
//     in the first window of a stint, where the simulated benign entry bumps end at z 0-1.1),
//     or at once on one window as improbable under "no rise" as two significant ones in a row:
//     z > SwitchConfirmation::kDecisiveZ, the z whose one-sided normal tail is the square of
//     kSignificanceZ's (3.28 for z = 2: a chance of 5e-4 instead of 2.3e-2). A destabilised
//     stint is that clear at once (simulated, N = 16, G = 1,024: z 17-23 in the first window),
//     and waiting for a second window there cost 1.2 points: its training loss came back
//     below the reference within that window, but the test accuracy the spike cost did not.
//   - Back-off: after a trip at the job's elapsed time t, gba is not entered again before 2t.
//     The waits double with each trip (t, 2t, 4t, ...), so at most log2(T / t_first) stints are
//     tried in a run of length T, and the instability, which belongs to the early high-rate part
//     of a schedule, is retried only when the run has gone twice as far.
// Limits: a slow rise that stays below the entry reference is not caught (the staleness-cost
// veto prices slow leaks); a job that enters gba without K sync losses (a coordinator restarted
// into gba) is not guarded in that stint.
//
// Thread-safety: NOT thread-safe (thread-compatible); the coordinator locks around it.
#ifndef SYNCOPATE_LIBS_STRAGGLER_LOSS_GUARD_H_
#define SYNCOPATE_LIBS_STRAGGLER_LOSS_GUARD_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace syncopate {

class LossGuard {
 public:
  // A level of the training loss in one window, with its standard error.
  struct WindowStats {
    int64_t count = 0;
    double mean = 0;
    double standard_error = 0;
  };
  // One judged gba window: its end level, the sync reference's (count 0 if there was none), how
  // many standard errors above the reference it sits, whether that is significant on its own
  // and whether it trips the guard (the second significant window in a row, or z above
  // SwitchConfirmation::kDecisiveZ).
  struct Verdict {
    WindowStats gba;
    WindowStats sync;
    double z = 0;
    bool significant = false;
    bool tripped = false;
    std::string explanation;
  };

  // `window` = K, the losses per window (>= 2; smaller values are raised to 2).
  explicit LossGuard(int64_t window);

  // K may change as workers join or leave; it applies to the next windows.
  void SetWindow(int64_t window);
  int64_t window() const { return window_; }

  // One training loss a member reported. Not finite: ignored (a diverged worker's NaN is the
  // trainer's to report, and one value must not poison a mean).
  void Add(double loss);

  // The job entered gba: the last K sync losses become the reference (none if fewer than K
  // were reported since the job was last in sync).
  void EnterGba();
  // The job is back in sync (for any reason): the sync window starts afresh.
  void LeaveGba();
  bool in_gba() const { return in_gba_; }

  // In gba, once K losses have arrived since the last judged window: the verdict on them (the
  // window is consumed); nullopt while the window is not full or outside gba. Call once per
  // decision round.
  std::optional<Verdict> Check();

  // A trip was acted on at the job's elapsed time `elapsed_seconds`: gba waits until twice that.
  void BackOff(double elapsed_seconds);
  // Whether gba may be entered at `elapsed_seconds`, and the time it may be entered from.
  bool GbaAllowed(double elapsed_seconds) const { return elapsed_seconds >= retry_at_seconds_; }
  double retry_at_seconds() const { return retry_at_seconds_; }
  int32_t trips() const { return trips_; }

 private:
  // The level a linear trend fitted to `losses` (in report order) reaches at the last one, and
  // its standard error.
  static WindowStats LevelAtEnd(const std::deque<double>& losses);

  int64_t window_;
  bool in_gba_ = false;
  std::deque<double> sync_losses_;  // the last window_ losses reported in sync
  std::optional<WindowStats> reference_;
  std::deque<double> current_;            // losses reported in gba since the last check
  bool last_window_significant_ = false;  // the previous judged window of this stint
  double retry_at_seconds_ = 0;
  int32_t trips_ = 0;
};

}  // namespace syncopate

#endif  // SYNCOPATE_LIBS_STRAGGLER_LOSS_GUARD_H_
