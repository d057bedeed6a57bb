// Pinocchio's own C++ (double) on the host: ns per call of its RNEA, ABA and CRBA on a model
// Pinocchio read from a URDF (saved by pinocchio.Model.saveToText),
// over the states bench/urdf.py writes (Pinocchio's coordinate order), for the figures
// beside mbforge's generated C (gcc -O2 both).
//
//   pin_time MODEL STATES REPS  ->  "rnea NS", "aba NS", "crba NS" (one line each)
//   STATES: one state a line, q v w (w: the accelerations for RNEA, the torques for ABA;
//   q of nq numbers, a free-flyer's 7, v and w of nv)
#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/serialization.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

template<typename F> static double ns_per_call(F f, size_t n, long reps)
{
  const auto a = std::chrono::steady_clock::now();
  for (long r = 0; r < reps; r++)
    for (size_t i = 0; i < n; i++) f(i);
  const auto b = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(b - a).count() / (double)(reps * (long)n);
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    std::fprintf(stderr, "usage: pin_time MODEL STATES REPS\n");
    return 2;
  }
  pinocchio::Model model;
  model.loadFromText(argv[1]);
  pinocchio::Data data(model);
  const int n = model.nv, nq = model.nq;
  std::ifstream in(argv[2]);
  std::vector<Eigen::VectorXd> q, v, w;
  for (;;) {
    Eigen::VectorXd x(nq + 2 * n);
    for (int k = 0; k < nq + 2 * n && in; k++) in >> x[k];
    if (!in) break;
    q.push_back(x.head(nq));
    v.push_back(x.segment(nq, n));
    w.push_back(x.tail(n));
  }
  const long reps = std::atol(argv[3]);
  double sink = 0;
  const double rnea = ns_per_call([&](size_t i) { sink += pinocchio::rnea(model, data, q[i], v[i], w[i])[0]; },
                                  q.size(), reps);
  const double aba = ns_per_call([&](size_t i) { sink += pinocchio::aba(model, data, q[i], v[i], w[i],
                                                                         pinocchio::Convention::LOCAL)[0]; },
                                 q.size(), reps);
  const double crba = ns_per_call([&](size_t i) { sink += pinocchio::crba(model, data, q[i])(0, 0); },
                                  q.size(), reps);
  std::printf("rnea %.1f\naba %.1f\ncrba %.1f\n", rnea, aba, crba);
  return sink == 12345.678;  // keeps the calls
}
