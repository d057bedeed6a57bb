// Pinocchio's RNEA, ABA and CRBA on its sample manipulator (buildModels::manipulator, the
// model behind pinocchio.buildSampleModelManipulator) or on a model Pinocchio read from a URDF
// (saved by pinocchio.Model.saveToText: the wheel has no URDF headers for C++), evaluated with
// casadi::SX scalars through pinocchio/autodiff/casadi.hpp, and saved as CasADi functions.
// bench/arms.py and bench/urdf.py compile this against the pin wheel's headers and the
// casadi wheel's library, then generate the C in Python, as the other CasADi figures of
// the bench are generated.
//
//   pin_export DIR [MODEL]  ->  DIR/pin_rnea.casadi (q, v, a -> tau), DIR/pin_aba.casadi
//                              (q, v, tau -> ddq), DIR/pin_crba.casadi (q -> M, nv x nv:
//                              the upper triangle Pinocchio computes, mirrored); q of nq
//                              numbers (a free-flyer's 7), v, a, tau of nv
#include <pinocchio/autodiff/casadi.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/multibody/sample-models.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/serialization.hpp>
#include <casadi/casadi.hpp>

#include <cstdio>
#include <string>

int main(int argc, char **argv)
{
  typedef casadi::SX SX;
  typedef pinocchio::ModelTpl<SX> ADModel;
  pinocchio::Model model;
  if (argc > 2)
    model.loadFromText(argv[2]);
  else
    pinocchio::buildModels::manipulator(model);
  ADModel ad = model.cast<SX>();
  ADModel::Data data(ad);
  const int n = model.nv, nq = model.nq;
  SX q = SX::sym("q", nq), v = SX::sym("v", n), a = SX::sym("a", n);
  ADModel::ConfigVectorType qe(nq), ve(n), ae(n);
  for (int k = 0; k < nq; k++) qe[k] = q(k);
  for (int k = 0; k < n; k++) {
    ve[k] = v(k);
    ae[k] = a(k);
  }
  pinocchio::rnea(ad, data, qe, ve, ae);
  SX tau = SX::zeros(n);
  for (int k = 0; k < n; k++) tau(k) = data.tau[k];
  pinocchio::aba(ad, data, qe, ve, ae, pinocchio::Convention::LOCAL);
  SX ddq = SX::zeros(n);
  for (int k = 0; k < n; k++) ddq(k) = data.ddq[k];
  pinocchio::crba(ad, data, qe);
  SX M = SX::zeros(n, n);
  for (int i = 0; i < n; i++)
    for (int j = i; j < n; j++) M(i, j) = M(j, i) = data.M(i, j);
  const std::string dir = argc > 1 ? argv[1] : ".";
  casadi::Dict opts;
  opts["cse"] = true;
  casadi::Function("pin_rnea", {q, v, a}, {tau}, opts).save(dir + "/pin_rnea.casadi");
  casadi::Function("pin_aba", {q, v, a}, {ddq}, opts).save(dir + "/pin_aba.casadi");
  casadi::Function("pin_crba", {q}, {M}, opts).save(dir + "/pin_crba.casadi");
  return 0;
}
