// Pinocchio's RNEA and ABA on its sample manipulator (buildModels::manipulator, the model
// behind pinocchio.buildSampleModelManipulator), evaluated with casadi::SX scalars through
// pinocchio/autodiff/casadi.hpp, and saved as CasADi functions. bench/arms.py compiles this
// against the pin wheel's headers and the casadi wheel's library, then generates the C
// in Python, as the other CasADi figures of the bench are generated.
//
//   pin_export DIR   ->  DIR/pin_rnea.casadi (q, v, a -> tau), DIR/pin_aba.casadi (q, v, tau -> ddq)
#include <pinocchio/autodiff/casadi.hpp>
#include <pinocchio/multibody.hpp>
#include <pinocchio/multibody/sample-models.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <casadi/casadi.hpp>

#include <string>

int main(int argc, char **argv)
{
  typedef casadi::SX SX;
  typedef pinocchio::ModelTpl<SX> ADModel;
  pinocchio::Model model;
  pinocchio::buildModels::manipulator(model);
  ADModel ad = model.cast<SX>();
  ADModel::Data data(ad);
  const int n = model.nv;
  SX q = SX::sym("q", n), v = SX::sym("v", n), a = SX::sym("a", n);
  ADModel::ConfigVectorType qe(n), ve(n), ae(n);
  for (int k = 0; k < n; k++) {
    qe[k] = q(k);
    ve[k] = v(k);
    ae[k] = a(k);
  }
  pinocchio::rnea(ad, data, qe, ve, ae);
  SX tau = SX::zeros(n);
  for (int k = 0; k < n; k++) tau(k) = data.tau[k];
  pinocchio::aba(ad, data, qe, ve, ae, pinocchio::Convention::LOCAL);
  SX ddq = SX::zeros(n);
  for (int k = 0; k < n; k++) ddq(k) = data.ddq[k];
  const std::string dir = argc > 1 ? argv[1] : ".";
  casadi::Dict opts;
  opts["cse"] = true;
  casadi::Function("pin_rnea", {q, v, a}, {tau}, opts).save(dir + "/pin_rnea.casadi");
  casadi::Function("pin_aba", {q, v, a}, {ddq}, opts).save(dir + "/pin_aba.casadi");
  return 0;
}
