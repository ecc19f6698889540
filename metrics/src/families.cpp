// Registration of metric families (metrics/families.hpp).
#include "metrics/families.hpp"

#include <string>

namespace search {

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& r, const families::Family& f) {
  return prometheus::BuildCounter().Name(std::string(f.name)).Help(std::string(f.help)).Register(r);
}
prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& r, const families::Family& f) {
  return prometheus::BuildGauge().Name(std::string(f.name)).Help(std::string(f.help)).Register(r);
}
prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& r, const families::Family& f) {
  return prometheus::BuildHistogram().Name(std::string(f.name)).Help(std::string(f.help)).Register(r);
}

void SetCounterTo(prometheus::Counter& counter, double value) {
  const double delta = value - counter.Value();
  if (delta > 0) counter.Increment(delta);
}

}  // namespace search
